package app

import (
	"github.com/factline/factline/internal/host/gateway"
	"github.com/factline/factline/internal/host/openapi"
	"github.com/factline/factline/internal/host/pluginhost"
	"github.com/factline/factline/internal/host/projector"
	"github.com/factline/factline/internal/host/webhook"
)

// Endpoints documents every endpoint New registers, in order, for a
// description of the API made without a server: the platform's (with
// /metrics when it is served on the API port) and the mounted ones.
func Endpoints(metrics bool) []openapi.Endpoint {
	var a *App // the handlers are not called
	eps := gateway.PlatformEndpoints(metrics)
	eps = append(eps, pluginhost.Endpoints()...)
	eps = append(eps, gateway.Docs(a.domainRoutes())...)
	eps = append(eps, webhook.Endpoints()...)
	eps = append(eps, projector.Endpoints()...)
	return append(eps, gateway.Docs(a.operatorRoutes())...)
}
