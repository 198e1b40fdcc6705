package app

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/factline/factline/host/manifest"
	"github.com/factline/factline/manifests"
)

// BuiltinDomainFile names the built-in domain manifest in problems.
const BuiltinDomainFile = "built-in domain.yaml"

// LoadDomain layers the domain manifests of sources (files, or
// directories of *.yaml) over the built-in one (see manifest.Layer).
func LoadDomain(sources ...string) (*manifest.Domain, error) {
	d, err := manifest.LoadLayered(BuiltinDomainFile, manifests.Domain, sources)
	if err != nil {
		return nil, fmt.Errorf("domain manifest:\n%w", err)
	}
	return d, nil
}

// Reload re-reads the gateway manifest, checks it exactly as `factline
// check` does, and swaps the route table atomically. An invalid manifest is
// refused with its problems and the current routes keep serving.
func (a *App) Reload() error {
	gw, err := manifest.LoadGatewayFile(a.cfg.Manifest, a.baseDomain)
	if err != nil {
		return err
	}
	if err := a.Platform.SetDomain(manifest.MergeDomain(a.baseDomain, gw)); err != nil {
		return err
	}
	a.Server.SetRoutes(gw)
	return nil
}

// watchManifest reloads on SIGHUP and, with Watch, when the file's content
// changes (polled once a second: portable, and a manifest is small).
func (a *App) watchManifest(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	var tick <-chan time.Time
	if a.cfg.Watch {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		tick = t.C
	}
	last := a.manifestHash
	reload := func(why string) {
		if err := a.Reload(); err != nil {
			a.cfg.Logger.Error("gateway manifest refused; the previous routes keep serving", "file", a.cfg.Manifest, "trigger", why, "problems", err.Error())
			return
		}
		a.cfg.Logger.Info("gateway manifest reloaded", "file", a.cfg.Manifest, "trigger", why, "routes", len(a.Server.Routes().Routes))
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			last = fileHash(a.cfg.Manifest)
			reload("SIGHUP")
		case <-tick:
			if h := fileHash(a.cfg.Manifest); h != nil && !bytes.Equal(h, last) {
				last = h
				reload("file changed")
			}
		}
	}
}

func fileHash(path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	sum := sha256.Sum256(b)
	return sum[:]
}
