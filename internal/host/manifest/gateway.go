package manifest

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/factline/factline/internal/host/store"
)

// Actions of a gateway route.
const (
	ActionEmit   = "emit"
	ActionGet    = "get"
	ActionCreate = "create"
	ActionList   = "list"
	ActionQuery  = "query"
	// ActionCommand runs a command of the entity type's ledger on the
	// entity the :id path parameter names.
	ActionCommand = "command"
)

// Auth modes of a route.
const (
	AuthAPIKey = "api_key"
	AuthPublic = "public"
)

// Rate-limit scopes.
const (
	ScopeTenant = "tenant"
	ScopeGlobal = "global"
)

// SystemEntity is the built-in entity whose get action reports the
// gateway's own status; it needs no declaration.
const SystemEntity = "system"

// PlatformFactType is the type of the facts the platform records itself
// (the webhook deliveries' audit facts); no entity type may declare it.
const PlatformFactType = "webhook"

var (
	methods  = []string{"GET", "POST", "PUT", "PATCH", "DELETE"}
	actions  = []string{ActionEmit, ActionGet, ActionCreate, ActionList, ActionQuery, ActionCommand}
	authes   = []string{AuthAPIKey, AuthPublic}
	scopes   = []string{ScopeTenant, ScopeGlobal}
	segRe    = regexp.MustCompile(`^[A-Za-z0-9._~\-]+$`)
	paramRe  = regexp.MustCompile(`^:[A-Za-z_][A-Za-z0-9_]*$`)
	gwFields = []string{"string", "number"}
)

// ReservedPaths are served by the host itself; a manifest route may not
// take them.
var ReservedPaths = []string{"/health", "/ready", "/metrics", "/openapi.json", "/docs", "/errors", "/errors/:slug"}

// ReservedPrefixes are owned by the platform API and the console.
var ReservedPrefixes = []string{"/v1/entities", "/v1/facts", "/v1/configs", "/v1/admin", "/v1/projections", "/v1/webhooks", "/console"}

// Gateway is a validated gateway (route) manifest.
type Gateway struct {
	Name    string
	Version string
	// Entities declared by the manifest, in declaration order. Types the
	// domain manifest does not know become platform entity types.
	Entities []*GatewayEntity
	Routes   []*Route
}

// GatewayEntity is an entity declaration of a gateway manifest.
type GatewayEntity struct {
	Name        string
	Description string
	Fields      []GatewayField
	Facts       []string
	Line        int
	pos         Diagnostic // for problems found against stored data
}

// GatewayField is a field of a gateway entity declaration.
type GatewayField struct {
	Name    string
	Type    string // string or number
	Indexed bool
	pos     Diagnostic
}

// Route is one declared route.
type Route struct {
	Path     string
	Method   string
	Entity   string
	Action   string
	FactType string
	// Command is the ledger command of action command.
	Command string
	Auth    string // api_key (the default) or public
	// RateLimit is nil when the route is not limited.
	RateLimit *RateLimit
	// Params are the :param names of Path, in order.
	Params []string
	// File, Line and Column locate the route.
	File         string
	Line, Column int

	// methodPos and commandPos locate the method and command values, for
	// CheckCommands.
	methodPos, commandPos Diagnostic
}

// RateLimit is a route's limit.
type RateLimit struct {
	RPM   int
	Scope string
}

// ID names the route for logs, metrics and limiter keys: "GET /path".
func (r *Route) ID() string { return r.Method + " " + r.Path }

// IsGateway reports whether YAML source looks like a gateway manifest (it
// has a top-level routes key) rather than a domain manifest. A domain
// manifest may carry routes too: one with subscriptions, or an entity
// type naming its ledger (which a gateway manifest's cannot), is a domain
// manifest. A top-level key that is none of the manifests' keys counts as
// the one it is a near miss of, as the parsers suggest it ("Routes" for
// routes): a gateway manifest with a misspelt routes key is a gateway
// manifest with an unknown key, not a domain manifest with no entities.
func IsGateway(src []byte) bool {
	// Read as a node, not a map: a manifest with a duplicated key is still
	// told apart (and its duplicate reported by the right parser).
	var doc yaml.Node
	if yaml.Unmarshal(src, &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return false
	}
	top, near := map[string]*yaml.Node{}, map[string]*yaml.Node{}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i].Value
		into := top
		if !contains(topKeys, k) {
			if k = closest(k, topKeys); k == "" {
				continue
			}
			into = near
		}
		if _, seen := into[k]; !seen {
			into[k] = m.Content[i+1]
		}
	}
	key := func(name string) (*yaml.Node, bool) {
		if v, ok := top[name]; ok {
			return v, true
		}
		v, ok := near[name]
		return v, ok
	}
	_, routes := key("routes")
	_, subs := key("subscriptions")
	if !routes || subs {
		return false
	}
	entities, _ := key("entities")
	if entities == nil {
		return true
	}
	for i := 1; i < len(entities.Content); i += 2 {
		e := entities.Content[i]
		for j := 0; e.Kind == yaml.MappingNode && j < len(e.Content); j += 2 {
			if e.Content[j].Value == "ledger" {
				return false
			}
		}
	}
	return true
}

// topKeys are the top-level keys of domain and gateway manifests.
var topKeys = []string{"name", "version", "entities", "subscriptions", "routes"}

// LoadGatewayFile reads and validates a gateway manifest. domain, when not
// nil, is used to check entity types and fact types.
func LoadGatewayFile(path string, domain *Domain) (*Gateway, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read gateway manifest: %w", err)
	}
	return ParseGateway(path, src, domain)
}

// ParseGateway validates a gateway manifest. On problems it returns an
// *Error listing every one of them.
func ParseGateway(file string, src []byte, domain *Domain) (*Gateway, error) {
	g, err := ParseGatewayPartial(file, src, domain)
	if err != nil {
		return nil, err
	}
	return g, nil
}

// ParseGatewayPartial is ParseGateway that also returns, beside the
// problems, what the document gave (nil when it is not YAML): routes with
// problems of their own among the rest, so a checker can go on checking
// the sound ones.
func ParseGatewayPartial(file string, src []byte, domain *Domain) (*Gateway, error) {
	c := &checker{file: file}
	top := c.parseDocument(src)
	if top == nil {
		return nil, c.err()
	}
	g := c.gateway(top, domain)
	return g, c.err()
}

// PrecheckGateway checks a gateway manifest before the domain model it
// is served with is known: serve checks it so before it opens the store,
// whose domain manifests complete the model. It reports the problems
// ParseGateway reports whatever the domain (the document's syntax, its
// keys, paths, methods, actions, route overlaps), and none that a domain
// manifest could resolve (an entity type or fact type the gateway
// manifest does not declare, an entity type's index slots). A manifest
// it passes may still have problems against the domain. On problems it
// returns an *Error.
func PrecheckGateway(file string, src []byte) error {
	c := &checker{file: file, domainLater: true}
	if top := c.parseDocument(src); top != nil {
		c.gateway(top, nil)
	}
	return c.err()
}

func (c *checker) gateway(top *yaml.Node, domain *Domain) *Gateway {
	f := c.fields(top, "manifest", "name", "version", "entities", "routes")
	g := &Gateway{}
	var nameNode, versionNode *yaml.Node
	g.Name, nameNode = c.str(f, "name", "manifest", true, top)
	g.Version, versionNode = c.str(f, "version", "manifest", true, top)
	c.text(nameNode, "manifest.name", false)
	c.text(versionNode, "manifest.version", false)
	declared := map[string]*GatewayEntity{}
	if ef, ok := f["entities"]; ok {
		if ef.value.Kind != yaml.MappingNode {
			c.at(ef.value, "entities must be a mapping, got %s", kindName(ef.value))
		} else {
			for i := 0; i+1 < len(ef.value.Content); i += 2 {
				k, v := ef.value.Content[i], ef.value.Content[i+1]
				if _, dup := declared[k.Value]; dup {
					c.at(k, "duplicate entity %q", k.Value)
					continue
				}
				e := c.gatewayEntity(k, v, domain)
				declared[e.Name] = e
				g.Entities = append(g.Entities, e)
			}
		}
	}
	rf, ok := f["routes"]
	if !ok {
		c.missing(top, "manifest", "routes")
		return g
	}
	if rf.value.Kind != yaml.SequenceNode {
		c.at(rf.value, "routes must be a list, got %s", kindName(rf.value))
		return g
	}
	if len(rf.value.Content) == 0 {
		c.at(rf.value, "routes must list at least one route")
	}
	index := newRouteIndex()
	for i, rn := range rf.value.Content {
		if r := c.route(i, rn, declared, domain); r != nil {
			c.overlap(index, r, rn)
			g.Routes = append(g.Routes, r)
		}
	}
	return g
}

func (c *checker) gatewayEntity(key, n *yaml.Node, domain *Domain) *GatewayEntity {
	what := "entities." + key.Value
	e := &GatewayEntity{Name: key.Value, Line: key.Line, pos: c.pos(key)}
	switch {
	case !identRe.MatchString(e.Name):
		c.at(key, "entity name %.80q must be lowercase letters, digits and underscores, starting with a letter", e.Name)
	case len(e.Name) > MaxTypeName:
		c.at(key, "entity name %.80q is %d characters; at most %d", e.Name, len(e.Name), MaxTypeName)
	}
	if e.Name == SystemEntity {
		c.at(key, "entity %q is built in and cannot be declared", SystemEntity)
	}
	f := c.fields(n, what, "description", "fields", "facts")
	var descNode *yaml.Node
	e.Description, descNode = c.str(f, "description", what, false, n)
	c.text(descNode, what+".description", true)
	var domainType *EntityType
	domainFields := map[string]Field{}
	if domain != nil {
		domainType = domain.Entities[e.Name]
	}
	if domainType != nil {
		for _, df := range domainType.Fields {
			if _, ok := domainFields[df.Name]; !ok {
				domainFields[df.Name] = df
			}
		}
	}
	indexedS, indexedN := 0, 0
	if ff, ok := f["fields"]; ok {
		if ff.value.Kind != yaml.MappingNode {
			c.at(ff.value, "%s.fields must be a mapping, got %s", what, kindName(ff.value))
		} else {
			for i := 0; i+1 < len(ff.value.Content); i += 2 {
				k, v := ff.value.Content[i], ff.value.Content[i+1]
				fw := what + ".fields." + k.Value
				if !identRe.MatchString(k.Value) {
					c.at(k, "field name %q must be lowercase letters, digits and underscores", k.Value)
				}
				fm := c.fields(v, fw, "type", "indexed")
				typ, tn := c.str(fm, "type", fw, true, v)
				if tn != nil && typ != "" && !contains(gwFields, typ) {
					c.at(tn, "%s.type: %q is not one of string, number", fw, typ)
				}
				idx := c.boolean(fm, "indexed", fw)
				if idx && reservedFilter(k.Value) {
					c.at(k, "%s: %q cannot be indexed: list routes use it as a query parameter", fw, k.Value)
				}
				if idx && typ == "string" {
					indexedS++
				} else if idx && typ == "number" {
					indexedN++
				}
				if domainType != nil {
					// The domain manifest's declaration is the one served: a
					// field it lacks, or does not index, would be dropped
					// without a word.
					df, ok := domainFields[k.Value]
					switch {
					case !ok:
						c.at(k, "%s: the domain manifest's entity type %s has no field %s, and its declaration is the one served; declare the field there", fw, e.Name, k.Value)
					case typ != "" && !compatible(typ, df.Type):
						c.at(v, "%s: type %s contradicts the domain manifest, which declares %s", fw, typ, df.Type)
					case idx && df.Storage == "":
						c.at(v, "%s: indexed here, but the domain manifest gives field %s no storage slot, so it cannot be filtered on; give it one there", fw, k.Value)
					}
				}
				e.Fields = append(e.Fields, GatewayField{Name: k.Value, Type: typ, Indexed: idx, pos: c.pos(k)})
			}
		}
	}
	// A type the domain declares has the domain's slots.
	if domainType == nil && !c.domainLater && (indexedS > store.StringSlots || indexedN > store.NumberSlots) {
		c.at(key, "%s indexes %d string and %d number fields; at most %d and %d fit the index slots", what, indexedS, indexedN, store.StringSlots, store.NumberSlots)
	}
	if ff, ok := f["facts"]; ok {
		facts, nodes := c.strList(ff.value, what+".facts")
		seen := map[string]bool{}
		for i, ft := range facts {
			switch {
			case ft == PlatformFactType:
				c.at(nodes[i], "%s.facts: fact type %q is the platform's own (the webhook deliveries' audit facts)", what, ft)
			case !identRe.MatchString(ft):
				c.at(nodes[i], "%s.facts: fact type %.80q must be lowercase letters, digits and underscores", what, ft)
			case len(ft) > MaxTypeName:
				c.at(nodes[i], "%s.facts: fact type %.80q is %d characters; at most %d", what, ft, len(ft), MaxTypeName)
			}
			if seen[ft] {
				c.at(nodes[i], "%s.facts: duplicate fact type %q", what, ft)
			}
			seen[ft] = true
			if domainType != nil && !c.factSet("domain "+e.Name, domainType.Facts)[ft] {
				c.at(nodes[i], "%s.facts: fact type %q is not declared for %s in the domain manifest", what, ft, e.Name)
			}
		}
		e.Facts = facts
	}
	return e
}

func compatible(gatewayType, domainType string) bool {
	if gatewayType == "number" {
		return domainType == TypeNumber || domainType == TypeInteger
	}
	return gatewayType == domainType
}

func (c *checker) route(i int, n *yaml.Node, declared map[string]*GatewayEntity, domain *Domain) *Route {
	what := fmt.Sprintf("routes[%d]", i)
	if n.Kind != yaml.MappingNode {
		c.at(n, "%s must be a mapping, got %s", what, kindName(n))
		return nil
	}
	f := c.fields(n, what, "path", "method", "entity", "action", "factType", "command", "auth", "rateLimit")
	r := &Route{File: c.file, Line: n.Line, Column: n.Column, Auth: AuthAPIKey}
	var pathNode, methodNode, entityNode, actionNode, factNode, commandNode, authNode *yaml.Node
	r.Path, pathNode = c.str(f, "path", what, true, n)
	r.Method, methodNode = c.str(f, "method", what, true, n)
	r.Entity, entityNode = c.str(f, "entity", what, true, n)
	r.Action, actionNode = c.str(f, "action", what, true, n)
	r.FactType, factNode = c.str(f, "factType", what, false, n)
	r.Command, commandNode = c.str(f, "command", what, false, n)
	r.methodPos, r.commandPos = c.pos(n), c.pos(n)
	if methodNode != nil {
		r.methodPos = c.pos(methodNode)
	}
	if commandNode != nil {
		r.commandPos = c.pos(commandNode)
	}
	// A value of the wrong kind (auth: ~) is reported as such by str and
	// leaves the default: what it is not one of follows from that.
	if a, an := c.str(f, "auth", what, false, n); an != nil && !c.wrongKind[an] {
		r.Auth, authNode = a, an
	}
	if methodNode != nil && r.Method != "" && !contains(methods, r.Method) {
		hint := ""
		if contains(methods, strings.ToUpper(r.Method)) {
			hint = fmt.Sprintf(" (write %s in upper case)", strings.ToUpper(r.Method))
		}
		c.at(methodNode, "%s.method: %q is not one of %s%s", what, r.Method, strings.Join(methods, ", "), hint)
	}
	if actionNode != nil && r.Action != "" && !contains(actions, r.Action) {
		c.at(actionNode, "%s.action: %q is not one of %s", what, r.Action, strings.Join(actions, ", "))
	}
	if authNode != nil && !contains(authes, r.Auth) {
		c.at(authNode, "%s.auth: %q is not one of api_key, public", what, r.Auth)
	}
	pathOK := false
	if pathNode != nil && r.Path != "" {
		before := len(c.diags)
		r.Params = c.checkPath(pathNode, what, r.Path)
		pathOK = len(c.diags) == before
	}
	if rl, ok := f["rateLimit"]; ok {
		r.RateLimit = c.rateLimit(what, rl.value)
	}
	// What depends on the action is said only of a known action: an
	// action that is not one (action: got, or of the wrong kind) is the
	// one mistake, said once.
	actionOK := contains(actions, r.Action)
	// Entity and fact type.
	if entityNode != nil && r.Entity != "" {
		known := r.Entity == SystemEntity || declared[r.Entity] != nil || (domain != nil && domain.Entities[r.Entity] != nil)
		if !known && !c.domainLater {
			if domain != nil {
				c.at(entityNode, "%s.entity: unknown entity type %q (declare it under entities or in the domain manifest)", what, r.Entity)
			} else {
				c.at(entityNode, "%s.entity: unknown entity type %q (declare it under entities)", what, r.Entity)
			}
		}
		if r.Entity == SystemEntity && actionOK && r.Action != ActionGet {
			c.at(actionNode, "%s: the built-in system entity serves only the get action", what)
		}
		// Every other entity is a tenant's: without a key no tenant is
		// named whose data the route would serve.
		if r.Entity != SystemEntity && r.Auth == AuthPublic && authNode != nil {
			c.at(authNode, "%s.auth: public serves only entity system; entity %s holds a tenant's data, which needs an API key to say whose", what, r.Entity)
		}
	}
	switch {
	case c.wrongKind[factNode]:
		// Reported as not a string.
	case r.Action == ActionEmit && r.FactType == "":
		c.at(n, "%s: action emit needs a factType", what)
	case actionOK && r.Action != ActionEmit && factNode != nil:
		c.at(factNode, "%s.factType applies only to action emit", what)
	case r.Action == ActionEmit && r.Entity != "" && r.Entity != SystemEntity && !c.domainLater:
		if !c.factDeclared(r.Entity, r.FactType, declared, domain) {
			c.at(factNode, "%s.factType: %q is not a fact type of entity %s", what, r.FactType, r.Entity)
		}
	}
	switch {
	case c.wrongKind[commandNode]:
		// Reported as not a string.
	case r.Action == ActionCommand && commandNode == nil:
		c.at(n, "%s: action command needs a command (the ledger command to run)", what)
	case actionOK && r.Action != ActionCommand && commandNode != nil:
		c.at(commandNode, "%s.command applies only to action command", what)
	case r.Action == ActionCommand && r.Command != "" && !identRe.MatchString(r.Command):
		c.at(commandNode, "%s.command: %q must be lowercase letters, digits and underscores, starting with a letter", what, r.Command)
	}
	if r.Action == ActionCommand && pathOK && !contains(r.Params, "id") {
		c.at(pathNode, "%s: action command needs the :id path parameter naming the entity (for example /members/:id/earn)", what)
	}
	// Whether a get route needs a parameter depends on its entity: the
	// built-in system entity needs none, and an entity that is missing or
	// not a string is not known to be another.
	tenantEntity := r.Entity != "" && r.Entity != SystemEntity
	switch {
	case r.Action == ActionGet && tenantEntity && pathOK && len(r.Params) == 0:
		c.at(pathNode, "%s: action get needs a path parameter naming the entity (for example /accounts/:id)", what)
	case r.Action == ActionGet && tenantEntity && pathOK && len(r.Params) > 1 &&
		!contains(r.Params, "id") && !contains(r.Params, "entityId") && !contains(r.Params, "entity_id"):
		c.at(pathNode, "%s: action get has several path parameters and none names the entity: call the one holding its id :id (or :entityId, :entity_id)", what)
	case (r.Action == ActionCreate || r.Action == ActionList) && pathOK && len(r.Params) > 0:
		// Their input is the body or the query string: a parameter
		// would be matched and then ignored.
		c.at(pathNode, "%s: action %s takes no path parameters (:%s would be ignored); its input is the %s", what, r.Action, strings.Join(r.Params, ", :"),
			map[string]string{ActionCreate: "body", ActionList: "query string"}[r.Action])
	}
	if methodNode != nil && actionNode != nil {
		if want := actionMethods[r.Action]; want != nil && contains(methods, r.Method) && !contains(want, r.Method) {
			c.at(methodNode, "%s: action %s takes %s, not %s", what, r.Action, strings.Join(want, " or "), r.Method)
		}
	}
	return r
}

// actionMethods are the methods each action accepts: reads are GET, writes
// carry a body.
var actionMethods = map[string][]string{
	ActionEmit:   {"POST", "PUT", "PATCH"},
	ActionGet:    {"GET"},
	ActionCreate: {"POST", "PUT"},
	ActionList:   {"GET"},
	ActionQuery:  {"POST", "GET"},
}

func (c *checker) factDeclared(entity, fact string, declared map[string]*GatewayEntity, domain *Domain) bool {
	if e := declared[entity]; e != nil && c.factSet("gateway "+entity, e.Facts)[fact] {
		return true
	}
	if domain != nil {
		if t := domain.Entities[entity]; t != nil && c.factSet("domain "+entity, t.Facts)[fact] {
			return true
		}
	}
	return false
}

// factSet returns the facts as a set, made once per key: looking each
// route's fact type up in a list would make a manifest with many fact
// types and many routes quadratic.
func (c *checker) factSet(key string, facts []string) map[string]bool {
	if set, ok := c.factSets[key]; ok {
		return set
	}
	set := make(map[string]bool, len(facts))
	for _, f := range facts {
		set[f] = true
	}
	if c.factSets == nil {
		c.factSets = map[string]map[string]bool{}
	}
	c.factSets[key] = set
	return set
}

func (c *checker) checkPath(n *yaml.Node, what, path string) []string {
	if !strings.HasPrefix(path, "/") {
		c.at(n, "%s.path: %q must start with /", what, path)
		return nil
	}
	if path != "/" && strings.HasSuffix(path, "/") {
		c.at(n, "%s.path: %q must not end with /", what, path)
	}
	var params []string
	// The empty-segment problem quotes the whole path, so it is reported
	// once per path, not once per segment: a long run of slashes must not
	// make the report grow with the square of the path.
	emptyReported := false
	seen := map[string]bool{}
	for _, seg := range strings.Split(strings.Trim(path, "/"), "/") {
		switch {
		case seg == "" && path != "/":
			if !emptyReported {
				c.at(n, "%s.path: %q has an empty segment", what, path)
				emptyReported = true
			}
		case strings.HasPrefix(seg, ":"):
			if !paramRe.MatchString(seg) {
				c.at(n, "%s.path: parameter %q must be : followed by a letter or _ and then letters, digits or _", what, seg)
				continue
			}
			if seen[seg] {
				c.at(n, "%s.path: parameter %q appears twice", what, seg)
			}
			seen[seg] = true
			params = append(params, seg[1:])
		case seg != "" && !segRe.MatchString(seg):
			c.at(n, "%s.path: segment %q may hold only letters, digits and . _ ~ -", what, seg)
		}
	}
	for _, p := range ReservedPaths {
		if shape(p) == shape(path) {
			c.at(n, "%s.path: %s is served by the gateway itself", what, path)
		}
	}
	var reached []string
	for _, p := range ReservedPrefixes {
		switch {
		case path == p || strings.HasPrefix(path, p+"/"):
			c.at(n, "%s.path: %s is under %s, which the gateway itself serves", what, path, p)
		case mayReach(path, p):
			reached = append(reached, p)
		}
	}
	if len(reached) > 0 {
		c.at(n, "%s.path: %s can match paths under %s, which the gateway itself serves: its parameters would take them over", what, path, strings.Join(reached, ", "))
	}
	return params
}

// decimalRe is a whole number written in decimal digits, without a
// plus sign or leading zeros (a minus is left to the range check).
var decimalRe = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// mayReach reports whether a route path with parameters matches some
// path at or under prefix: it has at least the prefix's segments, and
// each of them is the prefix's or a parameter (which matches any one
// segment).
func mayReach(path, prefix string) bool {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	want := strings.Split(strings.Trim(prefix, "/"), "/")
	if len(segs) < len(want) {
		return false
	}
	for i, w := range want {
		if segs[i] != w && !strings.HasPrefix(segs[i], ":") {
			return false
		}
	}
	return true
}

func (c *checker) rateLimit(what string, n *yaml.Node) *RateLimit {
	w := what + ".rateLimit"
	f := c.fields(n, w, "rpm", "scope")
	rl := &RateLimit{Scope: ScopeTenant}
	if p, ok := f["rpm"]; !ok {
		c.missing(n, w, "rpm")
	} else if p.value.Kind != yaml.ScalarNode || p.value.Tag != "!!int" || !decimalRe.MatchString(p.value.Value) || p.value.Decode(&rl.RPM) != nil {
		// Decimal digits only: YAML reads 010 as octal 8, and 0x10,
		// 0o10 and 1_0 as numbers a reader would not expect.
		c.at(p.value, "%s.rpm must be a whole number of requests per minute in decimal digits", w)
	} else if rl.RPM <= 0 {
		c.at(p.value, "%s.rpm must be positive, got %d", w, rl.RPM)
	} else if rl.RPM > 1_000_000 {
		c.at(p.value, "%s.rpm must be at most 1000000, got %d", w, rl.RPM)
	}
	if s, sn := c.str(f, "scope", w, false, n); sn != nil && !c.wrongKind[sn] {
		if !contains(scopes, s) {
			c.at(sn, "%s.scope: %q is not one of tenant, global", w, s)
		}
		rl.Scope = s
	}
	return rl
}

// shape replaces every :param segment by ":" so paths that differ only in
// parameter names compare equal.
func shape(path string) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i, s := range segs {
		if strings.HasPrefix(s, ":") {
			segs[i] = ":"
		}
	}
	return "/" + strings.Join(segs, "/")
}

// overlap reports a route that duplicates or is shadowed by an earlier one
// with the same method. Routes match in declaration order, so a route is
// shadowed when every path it matches is matched earlier. Only the first
// such earlier route is named: one problem per route keeps the report (and
// the work) linear when many routes repeat one path.
func (c *checker) overlap(index *routeIndex, r *Route, n *yaml.Node) {
	if r.Path == "" {
		return
	}
	dup, shadow := index.add(r)
	switch {
	case dup != nil:
		c.at(n, "route %s duplicates the route at %s (%s %s)", r.ID(), c.where(dup), dup.Method, dup.Path)
	case shadow != nil:
		c.at(n, "route %s is shadowed by the route at %s (%s %s), which matches every path it does; declare the more specific route first", r.ID(), c.where(shadow), shadow.Method, shadow.Path)
	}
}

// where locates an earlier route: its line in the same file, else its
// file:line:col (a domain layer's route against the gateway manifest's).
func (c *checker) where(r *Route) string {
	if r.File == c.file {
		return fmt.Sprintf("line %d", r.Line)
	}
	return fmt.Sprintf("%s:%d:%d", r.File, r.Line, r.Column)
}

// MergeDomain returns a domain extended with the gateway's entity types
// that the domain does not declare. Indexed fields get slots in declaration
// order; the built-in ledger ("builtin") serves them.
func MergeDomain(d *Domain, g *Gateway) *Domain {
	out := &Domain{Name: d.Name, Version: d.Version, Entities: map[string]*EntityType{}, Subscriptions: d.Subscriptions}
	for k, v := range d.Entities {
		out.Entities[k] = v
	}
	for _, e := range g.Entities {
		if _, ok := out.Entities[e.Name]; ok {
			continue
		}
		t := &EntityType{Name: e.Name, Ledger: "builtin", Description: e.Description, Facts: e.Facts, pos: e.pos}
		s, n := 0, 0
		for _, f := range e.Fields {
			fl := Field{Name: f.Name, Type: f.Type, pos: f.pos}
			if f.Indexed && f.Type == "string" {
				fl.Storage = store.SlotColumn(s, false)
				s++
			} else if f.Indexed && f.Type == "number" {
				fl.Storage = store.SlotColumn(n, true)
				n++
			}
			t.Fields = append(t.Fields, fl)
		}
		out.Entities[e.Name] = t
	}
	return out
}

// reservedFilter reports field names that listings use as query
// parameters, so they could never be filtered on.
func reservedFilter(name string) bool {
	return name == "cursor" || name == "limit" || name == "entity_type"
}
