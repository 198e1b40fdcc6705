package gateway

import (
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

// describe generates the document of the routes being served and of the
// commands the entity types' ledgers serve right now (plugins load and
// change at run time, so it is made per request: it is not a hot path).
func (s *Server) describe(gw *manifest.Gateway) apiDocs {
	domain := s.platform.Domain()
	commands := map[string][]ledger.CommandSpec{}
	for _, t := range domain.EntityTypeNames() {
		if cmds := s.platform.Commands(t); len(cmds) > 0 {
			commands[t] = cmds
		}
	}
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
