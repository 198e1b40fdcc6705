package gateway

import (
	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/host/manifest"
	"github.com/factline/factline/host/openapi"
	"github.com/factline/factline/host/problem"
)

// apiDocs is the OpenAPI document of one route table and its HTML
// rendering, generated when the table is installed.
type apiDocs struct {
	json []byte
	html []byte
	err  error
}

func (s *Server) describe(gw *manifest.Gateway) apiDocs {
	doc, err := openapi.Generate(gw, s.platform.Domain(), openapi.Options{Version: s.cfg.Version, DocsURL: s.cfg.DocsURL})
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
	d := s.table.Load().docs
	if d.err != nil {
		return problem.Wrap(problem.Internal, "The API description could not be generated", d.err)
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
	return c.Send(d.json)
}

// apiReference serves GET /docs, the human API reference.
func (s *Server) apiReference(c *fiber.Ctx) error {
	d := s.table.Load().docs
	if d.err != nil {
		return problem.Wrap(problem.Internal, "The API reference could not be generated", d.err)
	}
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	return c.Send(d.html)
}
