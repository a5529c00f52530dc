package api

import (
	"maps"
	"net/http"
)

// health adds /healthz (the process is up and serving), /readyz (the node may take work) and,
// when metrics is set, /metrics to mux.
func health(mux *http.ServeMux, nodeID, role string, ready func() Readiness, metrics http.Handler) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"node": nodeID, "role": role, "status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		rd := ready()
		body := map[string]any{"node": nodeID, "role": role, "ready": rd.Ready}
		maps.Copy(body, rd.Details)
		status := http.StatusOK
		if !rd.Ready {
			status = http.StatusServiceUnavailable
		}
		writeJSON(w, status, body)
	})
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
}

// NodeHandler serves a worker's HTTP port: /healthz, /readyz and /metrics, with no
// authentication (they reveal nothing but the node's state).
func NodeHandler(nodeID, role string, ready func() Readiness, metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	health(mux, nodeID, role, ready, metrics)
	return mux
}
