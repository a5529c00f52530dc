package soak

import (
	"math/rand"
	"testing"

	"github.com/zksched/zksched/workflow"
)

// TestKindsParse: every kind's definition is valid, so define does not fail a soak at setup,
// and declares the params its runs are given, by the soak or by a parent's workflow task.
func TestKindsParse(t *testing.T) {
	t.Parallel()
	all := kinds(func(body string) string { return body }, "/tmp/ledger",
		&sensorTargets{file: "/tmp/sensor-ready", url: "http://127.0.0.1:1/ready"})
	specs := map[string]*workflow.Spec{}
	for _, k := range all {
		if len(k.emit) > 0 {
			continue
		}
		spec, err := k.spec()
		if err != nil {
			t.Errorf("kind %s: %v", k.name, err)
			continue
		}
		specs[k.name] = spec
	}
	for _, k := range all {
		if spec := specs[k.name]; spec != nil && k.params != nil {
			if _, err := spec.RunParams(k.params(rand.New(rand.NewSource(1)))); err != nil {
				t.Errorf("kind %s refuses its runs' params: %v", k.name, err)
			}
		}
		for _, task := range k.tasks {
			child, _ := task["workflow"].(string)
			params, _ := task["params"].(map[string]string)
			if spec := specs[child]; spec != nil {
				if _, err := spec.RunParams(params); err != nil {
					t.Errorf("kind %s: task %v: the child refuses its params: %v", k.name, task["name"], err)
				}
			}
		}
	}
}
