package api_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/api"
	"github.com/zksched/zksched/dao/daotest"
)

// BenchmarkAPISubmit measures POST /api/v1/workflow-instances from 16 clients at once, each
// submit committed with its audit row, in the transactions the submitter shares among the
// submissions of the same moment:
//
//	go test -run '^$' -bench APISubmit -benchtime 2000x ./api
func BenchmarkAPISubmit(b *testing.B) {
	db, _ := daotest.New(b)
	s, err := api.New(api.Config{NodeID: "bench", Version: "bench", Cluster: fakeCluster{}, AllowUnauthenticated: true, Log: zerolog.Nop()}, db)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(s)
	b.Cleanup(srv.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	resp, err := client.Post(srv.URL+"/api/v1/definitions", "application/yaml",
		strings.NewReader("name: one\ntasks:\n  - {name: t, type: noop}\n"))
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("store the definition: %v %v", resp, err)
	}
	resp.Body.Close()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(srv.URL+"/api/v1/workflow-instances", "application/json", strings.NewReader(`{"name": "one"}`))
			if err != nil {
				b.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				b.Errorf("submit: status %d", resp.StatusCode)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "submits/s")
}
