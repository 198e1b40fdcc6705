package app

import (
	"fmt"
	"net/http"

	"github.com/factline/factline/internal/host/auth"
	"github.com/factline/factline/internal/host/console"
	"github.com/factline/factline/internal/host/webhook"
)

// mountConsole serves the console at /console on the gateway's listener.
// Its reads and writes are dispatched to the gateway's own handlers.
func (a *App) mountConsole(authn *auth.Authenticator) error {
	key, err := webhook.LoadSecretKey(a.cfg.SecretKey, a.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	c, err := console.New(console.Options{
		Store: a.Store, Auth: authn, SecretKey: key, OperatorTenant: a.cfg.OperatorTenant, Logger: a.cfg.Logger,
		API: func(req *http.Request) (*http.Response, error) { return a.Server.App().Test(req, -1) },
	})
	if err != nil {
		return err
	}
	c.Mount(a.Server.App())
	a.Server.ProblemPages(console.Prefix, c.ProblemPage)
	return nil
}
