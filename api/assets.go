package api

import (
	"errors"
	"net/http"

	"github.com/rs/zerolog"

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
	zerolog.Ctx(r.Context()).Info().Str("asset", name).Int64("asset_event", id).Msg("asset event emitted")
	writeJSON(w, http.StatusCreated, map[string]any{"asset": name, "event": id})
	return nil
}
