package testutil

import "github.com/factline/factline/internal/testutil/wait"

// Eventually polls cond until it reports true and fails t when timeout
// passes first; see package wait.
var Eventually = wait.Eventually

// EventuallyNil polls try until it returns nil and fails t with the last
// error when timeout passes first; see package wait.
var EventuallyNil = wait.EventuallyNil
