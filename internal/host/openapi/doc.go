// Package openapi describes a Factline gateway as an OpenAPI 3.0.3
// document and renders that document as deterministic JSON and as a
// self-contained HTML reference page.
//
// [Generate] reads a validated gateway manifest together with the domain
// manifest (merged with [manifest.MergeDomain], so entity types the
// gateway declares are known too) and describes:
//
//   - one path per manifest route, fiber's :param segments written as
//     {param}; routes whose paths differ only in parameter names share one
//     path item, named after the first route, because OpenAPI treats such
//     templates as the same path;
//   - per action, the request (body or query parameters) and the success
//     response inside the {data, meta} envelope, with the entity type's
//     declared fields, their types, enums and required fields;
//   - every error status a route can answer as an RFC 7807 problem
//     (application/problem+json, the Problem schema), 429 with Retry-After
//     and the RateLimit-* headers on rate-limited routes, and a default
//     problem response for the rest (405, 503, 504);
//   - the API-key requirement (the ApiKeyAuth scheme, header X-API-Key) on
//     api_key routes and an explicitly empty requirement on public ones;
//   - the endpoints the server registers itself ([Options.Endpoints]):
//     the platform API, the mounted admin, webhook, plugin and projection
//     endpoints, and the server's pages (/health, /ready, /metrics,
//     /errors/{slug}, /docs, /openapi.json). Each is registered with its
//     [Endpoint], so none is served undocumented.
//
// Schemas that depend on an entity type are named "<type>.Fields" (the
// entity's data) and "<type>.Entity" (the Entity object). Entity type names
// are lowercase identifiers and the fixed schema names hold no dot, so the
// names never collide.
//
// Operation ids of manifest routes are derived from method and path
// ("POST /v1/accounts/:id/deposits" is postV1AccountsByIdDeposits); the
// platform's are fixed names (createEntity, appendFact, ...). Should two
// derive the same id, later ones get a numeric suffix in declaration
// order, so ids stay unique and stable.
//
// [JSON] renders a document with sorted keys and two-space indentation, so
// the same manifests always give the same bytes. [DocsHTML] renders a page
// with inline CSS only: no scripts, fonts or style sheets are fetched,
// because the product runs offline.
package openapi
