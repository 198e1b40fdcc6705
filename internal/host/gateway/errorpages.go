package gateway

import (
	"html"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/problem"
)

// errorIndex lists every problem type at /errors, each linking to its
// page: the place a problem's "see .../errors/ for the list" points to.
func (s *Server) errorIndex(c *fiber.Ctx) error {
	var b strings.Builder
	b.WriteString("<!doctype html><html><head><meta charset=\"utf-8\"><title>Factline errors</title></head><body><h1>Problem types</h1>")
	b.WriteString("<p>Every error answer is an RFC 7807 problem whose <code>type</code> is ")
	b.WriteString(html.EscapeString(s.cfg.DocsURL))
	b.WriteString("/errors/&lt;slug&gt;.</p><table><thead><tr><th>Slug</th><th>Title</th><th>HTTP status</th></tr></thead><tbody>")
	for _, k := range problem.Catalogue {
		b.WriteString(`<tr><td><a href="/errors/`)
		b.WriteString(html.EscapeString(k.Slug))
		b.WriteString(`">`)
		b.WriteString(html.EscapeString(k.Slug))
		b.WriteString("</a></td><td>")
		b.WriteString(html.EscapeString(k.Title))
		b.WriteString("</td><td>")
		b.WriteString(strconv.Itoa(k.Status))
		b.WriteString("</td></tr>")
	}
	b.WriteString("</tbody></table></body></html>")
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	return c.SendString(b.String())
}

// errorPage serves the human page of a problem type at /errors/:slug, so a
// problem's `type` URI resolves when --docs-url points at this server.
func (s *Server) errorPage(c *fiber.Ctx) error {
	slug := Param(c, "slug")
	for _, k := range problem.Catalogue {
		if k.Slug != slug {
			continue
		}
		var b strings.Builder
		b.WriteString("<!doctype html><html><head><meta charset=\"utf-8\"><title>")
		b.WriteString(html.EscapeString(k.Title))
		b.WriteString(" - Factline errors</title></head><body><h1>")
		b.WriteString(html.EscapeString(k.Title))
		b.WriteString("</h1><p><code>")
		b.WriteString(html.EscapeString(s.cfg.DocsURL + "/errors/" + k.Slug))
		b.WriteString("</code> &middot; HTTP ")
		b.WriteString(strconv.Itoa(k.Status))
		b.WriteString("</p><p>")
		b.WriteString(html.EscapeString(k.Explanation()))
		b.WriteString("</p></body></html>")
		c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
		return c.SendString(b.String())
	}
	return problem.Newf(problem.NotFound, "No error type %q; see %s/errors/ for the list", slug, s.cfg.DocsURL)
}
