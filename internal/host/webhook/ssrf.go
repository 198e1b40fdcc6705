package webhook

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
)

// BlockedAddressError is returned when a delivery would connect to an
// address the service refuses: loopback, private, link-local (cloud
// metadata services live there), carrier-grade NAT, multicast, unspecified
// or reserved ranges. The check runs at connect time on the address DNS
// resolved to, so a public host name that resolves to an internal address
// (or is rebound to one) is refused too.
type BlockedAddressError struct {
	Addr netip.Addr
}

func (e *BlockedAddressError) Error() string {
	return fmt.Sprintf("destination address %s is not public (loopback, private, link-local or reserved); "+
		"allow it explicitly in the webhook allow-list to deliver there", e.Addr)
}

// blockedPrefixes are ranges refused beyond what netip's predicates cover.
var blockedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT (and 100.100.100.200, a metadata address)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and the broadcast address
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64: reaches IPv4 addresses through a translator
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("2002::/16"),       // 6to4: embeds any IPv4 address
}

// addressPolicy decides which addresses deliveries may connect to.
type addressPolicy struct {
	allow []netip.Prefix
}

// ParseAllowList parses a comma-separated list of CIDR prefixes or single
// addresses (for example "127.0.0.1,10.0.0.0/8") for Options.AllowNetworks.
func ParseAllowList(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if p, err := netip.ParsePrefix(part); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(part)
		if err != nil {
			return nil, fmt.Errorf("webhook allow-list: %q is neither an address nor a CIDR prefix", part)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// check returns a *BlockedAddressError unless a may be connected to.
func (p addressPolicy) check(a netip.Addr) error {
	a = a.Unmap()
	for _, pre := range p.allow {
		if pre.Contains(a) {
			return nil
		}
	}
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return &BlockedAddressError{Addr: a}
	}
	for _, pre := range blockedPrefixes {
		if pre.Contains(a) {
			return &BlockedAddressError{Addr: a}
		}
	}
	return nil
}

// checkURLHost returns what is wrong with a webhook URL whose host is an
// IP address the policy refuses, or "". Delivery would refuse it on every
// attempt, so a config naming it is refused at creation instead of
// dead-lettering every delivery. Host names are checked at connect time
// only: what they resolve to can change.
func (p addressPolicy) checkURLHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "" // checkURL reports it
	}
	a, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return ""
	}
	var blocked *BlockedAddressError
	if errors.As(p.check(a), &blocked) {
		return "url's host " + blocked.Addr.String() + " is not a public address (loopback, private, link-local or reserved), " +
			"so every delivery would be refused; the server allows such ranges with --webhook-allow-networks"
	}
	return ""
}

// control is a net.Dialer Control function: it runs after DNS resolution,
// before the socket connects, with the address actually dialled.
func (p addressPolicy) control(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("dial %s: not an IP address", address)
	}
	return p.check(a)
}
