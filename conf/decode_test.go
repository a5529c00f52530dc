package conf

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// mapSections has the shape of a map section such as llm.providers.<name>.<key>, which no
// section of Config has yet; the decoder and the environment must already handle it.
type mapSections struct {
	LLM struct {
		Providers map[string]testProvider `yaml:"providers"`
		Labels    map[string]string       `yaml:"labels"`
	} `yaml:"llm"`
}

type testProvider struct {
	BaseURL string        `yaml:"base-url"`
	Timeout time.Duration `yaml:"timeout"`
	Models  []string      `yaml:"models"`
}

const mapSectionsYAML = `llm:
  providers:
    openai:
      base-url: https://api.openai.com/v1
      timeout: 30s
    local-llama:
      models: [llama3, qwen]
  labels:
    team: ml
`

func TestDecodeMapSections(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		yaml string
		env  []string
		want map[string]testProvider
		// wantLabels is the labels map; nil means no check.
		wantLabels map[string]string
	}{
		{
			name: "file",
			yaml: mapSectionsYAML,
			want: map[string]testProvider{
				"openai":      {BaseURL: "https://api.openai.com/v1", Timeout: 30 * time.Second},
				"local-llama": {Models: []string{"llama3", "qwen"}},
			},
			wantLabels: map[string]string{"team": "ml"},
		},
		{
			name: "environment changes one key of an entry of the file",
			yaml: mapSectionsYAML,
			env:  []string{"ZKSCHED_LLM_PROVIDERS_OPENAI_TIMEOUT=5s", "ZKSCHED_LLM_PROVIDERS_LOCAL_LLAMA_MODELS=phi,gemma"},
			want: map[string]testProvider{
				"openai":      {BaseURL: "https://api.openai.com/v1", Timeout: 5 * time.Second},
				"local-llama": {Models: []string{"phi", "gemma"}},
			},
		},
		{
			name: "environment adds an entry",
			env:  []string{"ZKSCHED_LLM_PROVIDERS_MY_VLLM_BASE_URL=http://gpu1:8000/v1", "ZKSCHED_LLM_LABELS_TEAM=ml"},
			want: map[string]testProvider{
				"my_vllm": {BaseURL: "http://gpu1:8000/v1"},
			},
			wantLabels: map[string]string{"team": "ml"},
		},
		{
			name: "empty variable creates no entry",
			env:  []string{"ZKSCHED_LLM_PROVIDERS_OPENAI_TIMEOUT="},
			want: nil,
		},
		{
			name: "null entry in the file is an entry with zero values",
			yaml: "llm:\n  providers:\n    openai:\n",
			want: map[string]testProvider{"openai": {}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got mapSections
			errs := decodeFile(&got, "llm.yaml", []byte(tt.yaml))
			errs = append(errs, applyEnv(&got, tt.env)...)
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("decode error: %v", err)
			}
			if !reflect.DeepEqual(got.LLM.Providers, tt.want) {
				t.Errorf("providers = %+v, want %+v", got.LLM.Providers, tt.want)
			}
			if tt.wantLabels != nil && !reflect.DeepEqual(got.LLM.Labels, tt.wantLabels) {
				t.Errorf("labels = %+v, want %+v", got.LLM.Labels, tt.wantLabels)
			}
		})
	}
}

func TestDecodeMapSectionsRejects(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		yaml string
		env  []string
		want string
	}{
		{
			name: "unknown key in an entry",
			yaml: "llm:\n  providers:\n    openai:\n      base_url: x\n",
			want: `conf: llm.yaml:4: unknown key "llm.providers.openai.base_url"`,
		},
		{
			name: "bad value in an entry",
			yaml: "llm:\n  providers:\n    openai:\n      timeout: soon\n",
			want: `conf: llm.yaml:4: llm.providers.openai.timeout: invalid duration "soon"`,
		},
		{
			name: "entry not a mapping",
			yaml: "llm:\n  providers:\n    openai: yes\n",
			want: `conf: llm.yaml:3: llm.providers.openai: want a mapping, got "yes"`,
		},
		{
			name: "map section not a mapping",
			yaml: "llm:\n  providers: [openai]\n",
			want: `conf: llm.yaml:2: llm.providers: want a mapping, got a list`,
		},
		{
			name: "unknown key of an entry from the environment",
			env:  []string{"ZKSCHED_LLM_PROVIDERS_OPENAI_TOKEN=x"},
			want: "conf: ZKSCHED_LLM_PROVIDERS_OPENAI_TOKEN: unknown key",
		},
		{
			name: "bad value of an entry from the environment",
			env:  []string{"ZKSCHED_LLM_PROVIDERS_OPENAI_TIMEOUT=soon"},
			want: `conf: ZKSCHED_LLM_PROVIDERS_OPENAI_TIMEOUT: llm.providers.openai.timeout: invalid duration "soon"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got mapSections
			errs := decodeFile(&got, "llm.yaml", []byte(tt.yaml))
			errs = append(errs, applyEnv(&got, tt.env)...)
			err := errors.Join(errs...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// scalarSections has a field of each scalar kind the decoder supports.
type scalarSections struct {
	S struct {
		Flag  bool    `yaml:"flag"`
		Count uint16  `yaml:"count"`
		Ratio float64 `yaml:"ratio"`
		Name  string  `yaml:"name"`
		Skip  string  `yaml:"-"`
	} `yaml:"s"`
}

func TestDecodeScalars(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		yaml string
		env  []string
		want string // the error wanted, or "" for none
	}{
		{name: "valid", yaml: "s:\n  flag: true\n  count: 7\n  ratio: 0.5\n  name: n\n"},
		{name: "valid from environment", env: []string{"ZKSCHED_S_FLAG=true", "ZKSCHED_S_COUNT=7", "ZKSCHED_S_RATIO=0.5", "ZKSCHED_S_NAME=n"}},
		{name: "bad boolean", yaml: "s:\n  flag: maybe\n", want: `x.yaml:2: s.flag: invalid boolean "maybe"`},
		{name: "bad unsigned", yaml: "s:\n  count: -1\n", want: `x.yaml:2: s.count: invalid unsigned integer "-1"`},
		{name: "unsigned out of range", yaml: "s:\n  count: 70000\n", want: `s.count: unsigned integer "70000" out of range`},
		{name: "bad number", yaml: "s:\n  ratio: half\n", want: `x.yaml:2: s.ratio: invalid number "half"`},
		{name: "mapping for a boolean", yaml: "s:\n  flag: {a: 1}\n", want: `x.yaml:2: s.flag: want a boolean, got a mapping`},
		{name: "list for a number", yaml: "s:\n  ratio: [1]\n", want: `x.yaml:2: s.ratio: want a number, got a list`},
		{name: "untagged field is no key", yaml: "s:\n  Skip: x\n", want: `x.yaml:2: unknown key "s.Skip"`},
		{name: "key that is not a string", yaml: "s:\n  [a]: 1\n", want: `x.yaml:2: s: a key must be a string, got a list`},
		{name: "merge of a scalar", yaml: "s:\n  <<: 1\n", want: `x.yaml:2: s: a merge (<<) takes a mapping or a list of mappings, got "1"`},
		{name: "merge of a list of scalars", yaml: "s:\n  <<: [1]\n", want: `x.yaml:2: s: a merge (<<) takes mappings, got "1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got scalarSections
			errs := decodeFile(&got, "x.yaml", []byte(tt.yaml))
			errs = append(errs, applyEnv(&got, tt.env)...)
			err := errors.Join(errs...)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("decode error: %v", err)
				}
				if s := got.S; !s.Flag || s.Count != 7 || s.Ratio != 0.5 || s.Name != "n" {
					t.Errorf("decoded %+v, want flag, count 7, ratio 0.5, name n", s)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestDecodeMergeOrder(t *testing.T) {
	t.Parallel()

	// The mapping's own keys beat merged ones, and of merged mappings the earlier wins, as
	// the YAML merge key specification says.
	src := "x: &x {name: from-x, ratio: 1}\ny: &y {name: from-y, count: 2, ratio: 2}\n"
	var got struct {
		X map[string]string `yaml:"x"`
		Y map[string]string `yaml:"y"`
		S struct {
			Name  string  `yaml:"name"`
			Count int     `yaml:"count"`
			Ratio float64 `yaml:"ratio"`
		} `yaml:"s"`
	}
	if err := errors.Join(decodeFile(&got, "x.yaml", []byte(src+"s:\n  <<: [*x, *y]\n  ratio: 3\n"))...); err != nil {
		t.Fatal(err)
	}
	if got.S.Name != "from-x" || got.S.Count != 2 || got.S.Ratio != 3 {
		t.Errorf("s = %+v, want name from-x, count 2, ratio 3", got.S)
	}
}
