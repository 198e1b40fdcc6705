package gateway

import (
	"net/url"
	"strings"

	"github.com/factline/factline/internal/host/manifest"
)

// routeTable is the compiled, immutable form of a gateway manifest's
// routes. The server holds it behind an atomic pointer, so a reload swaps
// the whole table at once: a request sees the old table or the new one,
// never a mix.
type routeTable struct {
	manifest *manifest.Gateway
	routes   []compiledRoute
}

type compiledRoute struct {
	*manifest.Route
	segs []string // "" marks a :param segment
}

func compileTable(gw *manifest.Gateway) *routeTable {
	t := &routeTable{manifest: gw}
	if gw == nil {
		return t
	}
	for _, r := range gw.Routes {
		segs := splitPath(r.Path)
		for i, s := range segs {
			if strings.HasPrefix(s, ":") {
				segs[i] = ""
			}
		}
		t.routes = append(t.routes, compiledRoute{Route: r, segs: segs})
	}
	return t
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// match finds the first route for method and path, in declaration order.
// It fills params (name -> value) and reports whether another method
// would have matched the path.
func (t *routeTable) match(method, path string, params map[string]string) (r *compiledRoute, otherMethods []string) {
	segs := splitPath(path)
	for i := range t.routes {
		cr := &t.routes[i]
		if !cr.matches(segs) {
			continue
		}
		// A GET route answers HEAD; fasthttp leaves the body out.
		if cr.Method != method && (method != "HEAD" || cr.Method != "GET") {
			if !contains(otherMethods, cr.Method) {
				otherMethods = append(otherMethods, cr.Method)
			}
			continue
		}
		pi := 0
		for j, s := range cr.segs {
			if s == "" {
				params[cr.Params[pi]] = unescapeSegment(segs[j])
				pi++
			}
		}
		return cr, nil
	}
	return nil, otherMethods
}

// unescapeSegment percent-decodes a path parameter, as Param does for the
// platform's routes; one that does not decode is kept as sent.
func unescapeSegment(seg string) string {
	if !strings.Contains(seg, "%") {
		return seg
	}
	if v, err := url.PathUnescape(seg); err == nil {
		return v
	}
	return seg
}

func (cr *compiledRoute) matches(segs []string) bool {
	if len(segs) != len(cr.segs) {
		return false
	}
	for i, s := range cr.segs {
		if s == "" {
			if segs[i] == "" {
				return false
			}
			continue
		}
		if s != segs[i] {
			return false
		}
	}
	return true
}
