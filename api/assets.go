package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/lifecycle"
)

// assetTarget names an asset as an audit target.
func assetTarget(r *http.Request) string { return "asset/" + r.PathValue("name") }

// assetEmitJSON is the body of POST /api/v1/assets/{name}/events; an empty body emits an
// event without output.
type assetEmitJSON struct {
	Output *string `json:"output"`
}

// apiAssetEmit writes an event of the asset the path names, from outside any task: the
// workflows whose on-assets it completes start.
func (s *Server) apiAssetEmit(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	var body assetEmitJSON
	if r.ContentLength != 0 {
		if err := decodeJSON(r, &body); err != nil {
			return err
		}
	}
	// The audit row keeps the output's size, never the output: it is data for the
	// consumers' tasks.
	size := 0
	if body.Output != nil {
		size = len(*body.Output)
	}
	auditOf(r).setParams(map[string]any{"output_bytes": size})
	ev := s.auditEvent(r)
	id, err := lifecycle.EmitAsset(r.Context(), s.db, name, body.Output, principalOf(r).Name, &ev)
	switch {
	case errors.Is(err, lifecycle.ErrAssetName):
		return badRequest("%v", err)
	case errors.Is(err, lifecycle.ErrAssetOutputTooLarge):
		return errorf(http.StatusRequestEntityTooLarge, "%v", err)
	case err != nil:
		return err
	}
	auditDone(r)
	s.cfg.AssetEmitted()
	zerolog.Ctx(r.Context()).Info().Str("asset", name).Int64("asset_event", id).Msg("asset event emitted")
	writeJSON(w, http.StatusCreated, map[string]any{"asset": name, "event": id})
	return nil
}

// recentAssetEvents is how many events the assets page and GET /api/v1/assets show.
const recentAssetEvents = 50

// assetsPage is the assets page: every asset with its producers and consumers, and the
// latest events.
type assetsPage struct {
	base
	Assets []dao.AssetSummary
	Events []dao.AssetEvent
	Error  string
}

func (s *Server) pageAssets(w http.ResponseWriter, r *http.Request) error {
	p := &assetsPage{base: base{Title: "Assets", Nav: "assets"}}
	status := http.StatusOK
	var err error
	if p.Assets, p.Events, err = s.db.AssetList(r.Context(), recentAssetEvents); err != nil {
		status, p.Error = classify(err)
		logFor(r).Error().Err(err).Msg("asset list")
	}
	s.render(w, r, status, "assets", p)
	return nil
}

// apiAssets answers GET /api/v1/assets: what the assets page shows.
func (s *Server) apiAssets(w http.ResponseWriter, r *http.Request) error {
	if _, err := newQuery(r.URL.Query()); err != nil {
		return err
	}
	assets, evs, err := s.db.AssetList(r.Context(), recentAssetEvents)
	if err != nil {
		return err
	}
	type eventJSON struct {
		ID               int64     `json:"id"`
		Asset            string    `json:"asset"`
		TaskInstance     *int64    `json:"task_instance"`
		WorkflowInstance *int64    `json:"workflow_instance"`
		EmittedBy        *string   `json:"emitted_by"`
		Output           *string   `json:"output"`
		CreatedAt        time.Time `json:"created_at"`
	}
	out := struct {
		Assets []dao.AssetSummary `json:"assets"`
		Events []eventJSON        `json:"events"`
	}{Assets: assets, Events: make([]eventJSON, len(evs))}
	if out.Assets == nil {
		out.Assets = []dao.AssetSummary{}
	}
	for i, e := range evs {
		out.Events[i] = eventJSON{ID: e.ID, Asset: e.Asset, TaskInstance: e.TaskInstance, WorkflowInstance: e.WorkflowInstance,
			EmittedBy: e.EmittedBy, Output: e.Output, CreatedAt: e.CreatedAt}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
