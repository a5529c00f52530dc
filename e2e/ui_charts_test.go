package e2e

import (
	"bytes"
	"fmt"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/zksched/zksched/dao"
)

// chartColours are the bar colours of api/static/charts.css (and style.css's states), by the
// class of the bar.
var chartColours = map[string]color.RGBA{
	"succeeded": {0x1d, 0x8a, 0x4a, 0xff},
	"failed":    {0xc6, 0x2f, 0x2f, 0xff},
	"running":   {0x1f, 0x6f, 0xd6, 0xff},
	"slots":     {0xdb, 0xe6, 0xf7, 0xff},
	"queued":    {0xb9, 0xc3, 0xd3, 0xff},
	"p50":       {0x1f, 0x5f, 0xbf, 0xff},
}

// chartPixels screenshots the element sel, keeps it as name.png among the screenshots, and
// counts its pixels of each of the colours (within a little of each, for antialiasing).
func (b *browser) chartPixels(t *testing.T, sel, name string, colours ...string) map[string]int {
	t.Helper()
	raw := get(t, b, "screenshot "+sel, chromedp.Screenshot(css(sel)))
	if err := os.WriteFile(filepath.Join(b.shot, name+".png"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("screenshot of %s: %v", sel, err)
	}
	near := func(a, b uint8) bool { return max(a, b)-min(a, b) <= 6 }
	counts := map[string]int{}
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			for _, name := range colours {
				want := chartColours[name]
				if near(c.R, want.R) && near(c.G, want.G) && near(c.B, want.B) {
					counts[name]++
				}
			}
		}
	}
	return counts
}

// notBlank fails the test when a chart drew fewer than minPixels pixels of any of the
// colours it must show, from its element's screenshot.
func notBlank(t *testing.T, what string, counts map[string]int, minPixels int, colours ...string) {
	t.Helper()
	for _, c := range colours {
		if counts[c] < minPixels {
			t.Errorf("%s is blank in its screenshot: %d pixels of %s, want %d or more (all: %v)", what, counts[c], c, minPixels, counts)
		}
	}
}

// TestBrowserCharts: the overview's charts and a workflow instance's timeline are drawn, in
// the browser, for a cluster that ran a workflow whose task failed once and was retried, and
// another that failed: each chart has bars in its DOM for the data that exists, and its
// screenshot has their colours.
func TestBrowserCharts(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "", "ZKSCHED_API_TOKEN="+uiToken)
	master := e.Master("master")
	worker := e.Worker("worker")
	marker := filepath.Join(e.dir, "flaky-ran-once")
	retried := e.file(t, "retried.yaml", `
name: charts-retried
tasks:
  - {name: extract, type: shell, command: 'sleep 0.3; echo extracted'}
  - {name: flaky, type: shell, depends-on: [extract], retries: 1, retry-interval: 1s, command: 'sleep 0.3; if [ -e `+marker+` ]; then echo fixed; else touch `+marker+`; exit 3; fi'}
  - {name: load, type: shell, depends-on: [flaky], command: 'sleep 0.3; echo loaded'}
`)
	if out, code := e.Run("submit", "--wait", retried); code != 0 {
		t.Fatalf("submit --wait: exit %d\n%s", code, out)
	}
	const wf = 1
	if out, code := e.Run("submit", "--wait", e.file(t, "broken.yaml", "name: charts-broken\ntasks:\n  - {name: only, type: shell, command: 'exit 1'}\n")); code == 0 {
		t.Fatalf("submit --wait of a failing workflow: exit 0\n%s", out)
	}
	if flaky := e.tasks(t, wf)["flaky"]; flaky.State != dao.TaskSucceeded || flaky.Attempt != 2 {
		t.Fatalf("flaky is %s after %d attempts, want succeeded after a retry", flaky.State, flaky.Attempt)
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", master.Port)
	b := newBrowser(t)
	b.do(t, "log in", chromedp.Navigate(base+"/login"), chromedp.WaitVisible(css("#login-form")),
		chromedp.SetValue(css("#token"), uiToken), chromedp.Click(css("#login")), chromedp.WaitVisible(css("#chart-runs")))

	// The overview: the home page after the login.
	count := func(sel string) int {
		return get(t, b, "count "+sel, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
	}
	for sel, want := range map[string]int{
		"#chart-runs rect.bar.succeeded": 1, "#chart-runs rect.bar.failed": 1,
		"#chart-groups rect.bar.slots":  1,
		"#chart-durations rect.bar.p50": 2,
	} {
		if got := count(sel); got < want {
			t.Errorf("%d of %s on the overview, want %d or more", got, sel, want)
		}
	}
	if n := count("svg[data-empty]"); n != 0 {
		t.Errorf("%d of the overview's charts say they have nothing to draw", n)
	}
	b.screenshot(t, "overview")
	notBlank(t, "the runs chart", b.chartPixels(t, "#chart-runs", "chart-runs", "succeeded", "failed"), 100, "succeeded", "failed")
	notBlank(t, "the groups chart", b.chartPixels(t, "#chart-groups", "chart-groups", "slots"), 100, "slots")
	notBlank(t, "the durations chart", b.chartPixels(t, "#chart-durations", "chart-durations", "p50"), 100, "p50")

	// The timeline of the retried workflow: a row per task, flaky's failed attempt and its
	// retry each a bar naming the worker.
	b.do(t, "workflow timeline", chromedp.Navigate(fmt.Sprintf("%s/workflows/%d", base, wf)), chromedp.WaitVisible(css("#timeline")))
	rows := get(t, b, "timeline rows", chromedp.Evaluate[map[string][]string](`Object.fromEntries([...document.querySelectorAll("#timeline g.row")].map(
		r => [r.dataset.task, [...r.querySelectorAll("g.bar")].map(g => g.getAttribute("class") + " " + (g.dataset.worker || ""))]))`))
	flaky, id := strings.Join(rows["flaky"], ", "), worker.ID(t, time.Second)
	if len(rows) != 3 || !strings.Contains(flaky, "bar failed "+id) || !strings.Contains(flaky, "bar succeeded "+id) ||
		!strings.Contains(strings.Join(rows["load"], ","), "bar succeeded") {
		t.Errorf("timeline rows = %v, want extract, flaky (failed, then succeeded, on the worker) and load", rows)
	}
	if n := count("#timeline text.tick"); n < 2 {
		t.Errorf("the timeline's axis has %d ticks", n)
	}
	b.screenshot(t, "workflow-timeline")
	notBlank(t, "the timeline", b.chartPixels(t, "#timeline", "timeline", "succeeded", "failed"), 50, "succeeded", "failed")

	// The old address of a filtered task list leads to it.
	b.do(t, "old task list URL", chromedp.Navigate(base+"/?state=failed"), chromedp.WaitVisible(css("#tasks")))
	if loc := get(t, b, "location", chromedp.Location()); !strings.Contains(loc, "/tasks?state=failed") {
		t.Errorf("/?state=failed led to %s, want the task list", loc)
	}
}
