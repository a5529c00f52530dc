package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"
)

// parts runs long-running parts of a node together. Every long-running part of zksched has
// one shape, a Run(ctx) error: it runs until ctx ends and then returns nil, or returns early
// with the error that stopped it. The first part to return an error stops the others.
type parts struct {
	g    *errgroup.Group
	ctx  context.Context
	stop context.CancelFunc
}

// startParts returns an empty set of parts; they run until Stop, or until one fails.
func startParts() *parts {
	ctx, stop := context.WithCancel(context.Background())
	g, ctx := errgroup.WithContext(ctx)
	return &parts{g: g, ctx: ctx, stop: stop}
}

// Go starts run as the part name.
func (p *parts) Go(name string, run func(context.Context) error) {
	p.g.Go(func() error {
		if err := run(p.ctx); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	})
}

// Ended is closed once a part has failed or Stop was called.
func (p *parts) Ended() <-chan struct{} { return p.ctx.Done() }

// Wait waits for every part to return, and returns the first error.
func (p *parts) Wait() error { return p.g.Wait() }

// Stop ends every part's context, waits for them to return, and returns the first error.
func (p *parts) Stop() error {
	p.stop()
	return p.g.Wait()
}

// serveHTTP serves srv on ln until ctx ends. A server that stops on its own is logged: the
// node goes on without its HTTP port, as its work does not depend on it.
func serveHTTP(srv *http.Server, ln net.Listener, log zerolog.Logger) func(context.Context) error {
	return func(ctx context.Context) error {
		stop := context.AfterFunc(ctx, func() { srv.Close() })
		defer stop()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("http server stopped")
		}
		return nil
	}
}
