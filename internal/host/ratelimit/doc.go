// Package ratelimit limits requests per key (a route, or a route and a
// tenant) to a number of requests per minute.
//
// The algorithm is GCRA, the generic cell rate algorithm, with an emission
// interval T = 60 s / rpm (rounded up to a whole microsecond) and a burst of
// rpm: a fresh key may spend its whole minute's allowance at once, then it
// refills at one request per T. The only state per key is its theoretical
// arrival time (TAT); a request that is rejected does not move it, so a
// client that backs off recovers. In any 60-second interval [t, t+60 s) at
// most 2·rpm−1 requests pass, and over a long run at most rpm per minute.
//
// [Redis] keeps the TAT in Redis and decides in one Lua script per request
// (one round trip) using the server's clock, so any number of gateway
// processes share a limit exactly even when their own clocks disagree. For
// limits of 2000 rpm and more, one script call admits a busy key's next few
// requests at once (a lease of at most rpm/1000) for the process to hand
// out; lease.go describes what that changes.
// [Memory] keeps it in process for the embedded default. Both compute the
// same decision from the same integer microsecond arithmetic, and one test
// suite runs against both.
package ratelimit
