package executor

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/zksched/zksched/notify"
	"github.com/zksched/zksched/workflow"
)

// TestSensorHTTPReadsAssets: an http sensor's expect.json reads the asset events that started
// its run, as every template of the run does.
func TestSensorHTTPReadsAssets(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"batch": "b-42"}`)
	}))
	t.Cleanup(srv.Close)
	spec, err := workflow.Parse([]byte("name: s\non-assets: {any: [orders]}\ntasks:\n  - name: s\n    type: sensor\n" +
		"    http: {url: '" + srv.URL + "', expect: {json: '{{ eq .body.batch .assets.orders.output }}'}}\n    interval: 10s\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := Sensor{Client: notify.OutboundClient(5*time.Second, true), Events: &sensorEvents{}}
	cps := newCheckpoints()
	task := Task{ID: 1, Spec: spec.Tasks[0], Checkpoints: cps, Assets: map[string]workflow.AssetInput{"orders": {Output: "b-41", Event: 1}}}
	wantPaused(t, cps.run(s, &task, io.Discard), workflow.SensorStep, 10*time.Second)
	task.Assets["orders"] = workflow.AssetInput{Output: "b-42", Event: 2}
	wantTrue(t, cps.run(s, &task, io.Discard), `{"batch": "b-42"}`)
}
