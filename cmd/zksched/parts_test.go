package main

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// TestPartsFirstFailureStopsTheRest: a part's error, named, ends the set and every other
// part's context; Wait returns once all have returned.
func TestPartsFirstFailureStopsTheRest(t *testing.T) {
	p := startParts()
	boom := errors.New("boom")
	var stopped atomic.Int32
	for range 3 {
		p.Go("patient", func(ctx context.Context) error {
			<-ctx.Done()
			stopped.Add(1)
			return nil
		})
	}
	fail := make(chan struct{})
	p.Go("fragile", func(ctx context.Context) error {
		<-fail
		return boom
	})
	select {
	case <-p.Ended():
		t.Fatal("the set ended before any part failed")
	default:
	}
	close(fail)
	<-p.Ended()
	err := p.Wait()
	if !errors.Is(err, boom) || err.Error() != "fragile: boom" {
		t.Fatalf("Wait = %v; want the failed part's error, named", err)
	}
	if n := stopped.Load(); n != 3 {
		t.Fatalf("%d of 3 parts returned before Wait did", n)
	}
}

// TestPartsStop: Stop ends every part and waits for them; parts that end cleanly give nil.
func TestPartsStop(t *testing.T) {
	p := startParts()
	var stopped atomic.Int32
	for range 3 {
		p.Go("part", func(ctx context.Context) error {
			<-ctx.Done()
			stopped.Add(1)
			return nil
		})
	}
	if err := p.Stop(); err != nil || stopped.Load() != 3 {
		t.Fatalf("Stop = %v with %d of 3 parts returned; want nil, all", err, stopped.Load())
	}
	<-p.Ended()
}
