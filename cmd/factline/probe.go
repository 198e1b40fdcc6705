package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// runProbe answers a container HEALTHCHECK: exit 0 when the URL answers
// 200, 1 otherwise. Images without curl or a shell can still check /ready.
func runProbe(ctx context.Context, args []string, stdout, _ io.Writer) error {
	fs := newFlags("probe", "probe [--url URL] [--timeout D]")
	url := fs.String("url", "http://127.0.0.1:8080/ready", "URL that must answer 200")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if *timeout <= 0 {
		return usageErr("factline probe: --timeout must be positive, got %v", *timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		return usageErr("factline probe: --url: %v", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", *url, resp.Status)
	}
	fmt.Fprintf(stdout, "%s: %s\n", *url, resp.Status)
	return nil
}
