package manifest

import (
	"errors"
	"slices"

	"gopkg.in/yaml.v3"
)

// routeSource is the routes: list of one domain manifest.
type routeSource struct {
	file string
	node *yaml.Node
}

// LayerRoutes returns the gateway manifest gw (nil: none) with the routes
// the domain manifests layered into d carry appended after its own, in
// layer order. Each is checked like a gateway manifest route, against d
// and the entity types gw declares; a route that duplicates or is
// shadowed by an earlier one, in any file, is refused at its
// file:line:col naming the other. With no layer routes it returns gw.
func LayerRoutes(d *Domain, gw *Gateway) (*Gateway, error) {
	if len(d.routes) == 0 {
		return gw, nil
	}
	out := &Gateway{Name: "factline", Version: d.Version}
	declared := map[string]*GatewayEntity{}
	index := newRouteIndex()
	if gw != nil {
		out.Name, out.Version, out.Entities = gw.Name, gw.Version, gw.Entities
		out.Routes = slices.Clone(gw.Routes)
		for _, e := range gw.Entities {
			declared[e.Name] = e
		}
		for _, r := range gw.Routes {
			index.add(r)
		}
	}
	var diags []Diagnostic
	for _, src := range d.routes {
		c := &checker{file: src.file}
		for i, rn := range src.node.Content {
			if r := c.route(i, rn, declared, d); r != nil {
				c.overlap(index, r, rn)
				out.Routes = append(out.Routes, r)
			}
		}
		if err := c.err(); err != nil {
			var me *Error
			if errors.As(err, &me) {
				diags = append(diags, me.Diagnostics...)
			}
		}
	}
	if len(diags) > 0 {
		return nil, &Error{Diagnostics: diags}
	}
	return out, nil
}
