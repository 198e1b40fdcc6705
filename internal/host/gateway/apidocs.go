package gateway

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/ledger"
	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/openapi"
	"github.com/factline/factline/internal/host/problem"
)

// apiDocs is the OpenAPI document of one route table and its HTML
// rendering, generated when the table is installed.
type apiDocs struct {
	json []byte
	html []byte
	err  error
}

// docsCache keeps the last document made and what it was made of.
type docsCache struct {
	mu   sync.Mutex
	key  string
	docs apiDocs
	// refs keeps what the key names by address alive, so no other
	// object can take one of its addresses while the document is kept.
	refs []any
}

// describe returns the document of the routes being served and of the
// commands the entity types' ledgers serve right now. Plugins load and
// change at run time, so what it is made of is read per request; the
// document is made again only when that changed (a plugin's commands can
// make it megabytes, and /openapi.json is public), by one request while
// the others wait for it.
func (s *Server) describe(gw *manifest.Gateway) apiDocs {
	domain := s.platform.Domain()
	commands := map[string][]ledger.CommandSpec{}
	var key strings.Builder
	fmt.Fprintf(&key, "%p %p", gw, domain)
	refs := []any{gw, domain}
	for _, t := range domain.EntityTypeNames() {
		if cmds := s.platform.Commands(t); len(cmds) > 0 {
			commands[t] = cmds
			refs = append(refs, cmds)
			// A ledger's command list is the same slice until its plugin
			// changes (the command cache keeps it per plugin version).
			fmt.Fprintf(&key, " %s:%p:%d", t, unsafe.SliceData(cmds), len(cmds))
		}
	}
	c := &s.docs
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.key == key.String() {
		return c.docs
	}
	c.key, c.docs, c.refs = key.String(), s.generateDocs(gw, domain, commands), refs
	return c.docs
}

func (s *Server) generateDocs(gw *manifest.Gateway, domain *manifest.Domain, commands map[string][]ledger.CommandSpec) apiDocs {
	doc, err := openapi.Generate(gw, domain, openapi.Options{Version: s.cfg.Version, DocsURL: s.cfg.DocsURL, Commands: commands, Endpoints: s.endpoints})
	if err != nil {
		return apiDocs{err: err}
	}
	var d apiDocs
	if d.json, d.err = openapi.JSON(doc); d.err != nil {
		return d
	}
	d.html, d.err = openapi.DocsHTML(doc)
	return d
}

// openAPI serves GET /openapi.json for the routes being served.
func (s *Server) openAPI(c *fiber.Ctx) error {
	d := s.describe(s.table.Load().manifest)
	if d.err != nil {
		return problem.Wrap(problem.Internal, "The API description could not be generated", d.err)
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
	return c.Send(d.json)
}

// apiReference serves GET /docs, the human API reference.
func (s *Server) apiReference(c *fiber.Ctx) error {
	d := s.describe(s.table.Load().manifest)
	if d.err != nil {
		return problem.Wrap(problem.Internal, "The API reference could not be generated", d.err)
	}
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	return c.Send(d.html)
}
