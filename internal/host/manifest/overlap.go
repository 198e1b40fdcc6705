package manifest

import "strings"

// routeIndex answers, for each route in declaration order, which earlier
// route of the same method it duplicates or is shadowed by. Comparing every
// route with every earlier one made checking quadratic (a 20,000-route
// manifest took over a minute); the index keeps it linear in the size of
// the manifest for paths of ordinary depth.
type routeIndex struct {
	// shapes holds the first route of each method and shape.
	shapes map[string]*Route
	// roots holds, per method, a tree of path segments over the routes
	// that no earlier route covers. A covered route need not be kept:
	// whatever it covers, the route covering it covers too, and earlier.
	roots map[string]*segNode
	next  int
	// visits counts the nodes searches looked at, so tests can show the
	// work stays proportional to the routes.
	visits int
}

// segNode is one path segment; a route ends at the node of its last one.
type segNode struct {
	literal map[string]*segNode
	param   *segNode
	route   *Route
	order   int // declaration order of route
	// first is the smallest declaration order of a route ending in this
	// subtree; routes only arrive in order, so it is set once, when the
	// node is made, and lets a search skip subtrees that cannot win.
	first int
}

func newRouteIndex() *routeIndex {
	return &routeIndex{shapes: map[string]*Route{}, roots: map[string]*segNode{}}
}

// add records r and returns the first earlier route with the same shape
// (dup) or, when there is none, the first earlier route that matches every
// path r matches (shadow). Both are nil when r is reachable.
func (x *routeIndex) add(r *Route) (dup, shadow *Route) {
	order := x.next
	x.next++
	key := r.Method + " " + shape(r.Path)
	if first, ok := x.shapes[key]; ok {
		return first, nil
	}
	x.shapes[key] = r
	segs := strings.Split(strings.Trim(r.Path, "/"), "/")
	root := x.roots[r.Method]
	if root == nil {
		root = &segNode{first: order}
		x.roots[r.Method] = root
	}
	best, bestOrder := (*Route)(nil), order
	root.cover(segs, &best, &bestOrder, &x.visits)
	if best != nil {
		return nil, best
	}
	n := root
	for _, s := range segs {
		n = n.child(s, order)
	}
	n.route, n.order = r, order
	return nil, nil
}

// child returns the node of segment s below n, making it if needed.
func (n *segNode) child(s string, order int) *segNode {
	if strings.HasPrefix(s, ":") {
		if n.param == nil {
			n.param = &segNode{first: order}
		}
		return n.param
	}
	c := n.literal[s]
	if c == nil {
		if n.literal == nil {
			n.literal = map[string]*segNode{}
		}
		c = &segNode{first: order}
		n.literal[s] = c
	}
	return c
}

// cover finds the earliest route below n, before *bestOrder, whose
// remaining segments match every value of segs: a parameter matches
// anything, a literal only the same literal.
func (n *segNode) cover(segs []string, best **Route, bestOrder, visits *int) {
	if n == nil || n.first >= *bestOrder {
		return
	}
	*visits++
	if len(segs) == 0 {
		if n.route != nil && n.order < *bestOrder {
			*best, *bestOrder = n.route, n.order
		}
		return
	}
	n.param.cover(segs[1:], best, bestOrder, visits)
	if !strings.HasPrefix(segs[0], ":") {
		n.literal[segs[0]].cover(segs[1:], best, bestOrder, visits)
	}
}
