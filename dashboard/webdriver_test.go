package dashboard_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ingest-engine/ingest/internal/testkit"
)

// A minimal client of the W3C WebDriver protocol (https://www.w3.org/TR/webdriver2/)
// as chromedriver speaks it: JSON over HTTP, so net/http and encoding/json are
// all it needs, and the module gains no dependency.

// elementKey is the W3C name of the member that carries an element reference.
const elementKey = "element-6066-11e4-a52e-4f735466cecf"

// browserTools finds Debian's chromium and chromedriver. When either is
// missing the test skips, or fails under INGEST_REQUIRE_SERVICES=1 (as in CI).
func browserTools(t *testing.T) (chromium, driver string) {
	t.Helper()
	chromium, err1 := exec.LookPath("chromium")
	driver, err2 := exec.LookPath("chromedriver")
	if err1 != nil || err2 != nil {
		msg := "the dashboard's browser test needs chromium and chromedriver on PATH: run .ci/chromium " +
			"(apt-get install -y chromium chromium-driver)"
		if os.Getenv("INGEST_REQUIRE_SERVICES") == "1" {
			t.Fatal(msg + " (INGEST_REQUIRE_SERVICES=1)")
		}
		t.Skip(msg)
	}
	return chromium, driver
}

// startChromedriver runs chromedriver on a free port until the test ends and
// returns its base URL.
func startChromedriver(t *testing.T, driver string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port for chromedriver: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	out := &testkit.SyncBuffer{}
	cmd := exec.Command(driver, "--port="+strconv.Itoa(port), "--allowed-ips=127.0.0.1")
	// The browser inherits the driver's environment: one time zone for
	// every run, so the times the page shows do not depend on the machine.
	cmd.Env = append(os.Environ(), "TZ=UTC")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", driver, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("chromedriver output:\n%s", out.String())
		}
	})
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var status struct {
			Ready bool `json:"ready"`
		}
		if err := call(http.MethodGet, base+"/status", nil, &status); err == nil && status.Ready {
			return base
		} else if time.Now().After(deadline) {
			t.Fatalf("chromedriver on port %d not ready after 20s (last error %v); output:\n%s", port, err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// session is one WebDriver session: one headless browser window.
type session struct {
	t    *testing.T
	base string // .../session/{id}
}

// newSession starts headless chromium through chromedriver with a window of
// width × height CSS pixels; the session ends with the test.
func newSession(t *testing.T, driverURL, chromium string, width, height int) *session {
	t.Helper()
	caps := map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"browserName": "chrome",
		"goog:chromeOptions": map[string]any{
			"binary": chromium,
			"args": []string{
				"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
				"--no-first-run", "--disable-extensions", "--hide-scrollbars", "--lang=en-US",
				"--force-device-scale-factor=1", fmt.Sprintf("--window-size=%d,%d", width, height),
			},
		},
		"goog:loggingPrefs": map[string]string{"browser": "ALL"},
	}}}
	var created struct {
		SessionID string `json:"sessionId"`
	}
	if err := call(http.MethodPost, driverURL+"/session", caps, &created); err != nil {
		t.Fatalf("create a WebDriver session with %s: %v", chromium, err)
	}
	s := &session{t: t, base: driverURL + "/session/" + created.SessionID}
	t.Cleanup(func() { _ = call(http.MethodDelete, s.base, nil, nil) })
	return s
}

// call sends one WebDriver command and decodes the "value" of its answer
// into out (when out is not nil).
func call(method, url string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("webdriver %s %s: %w", method, url, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return fmt.Errorf("webdriver %s %s: %w", method, url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Timeout: 60 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("webdriver %s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("webdriver %s %s: read answer: %w", method, url, err)
	}
	var envelope struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(raw, &envelope); err != nil {
		return fmt.Errorf("webdriver %s %s: HTTP %d, not JSON: %.300s", method, url, resp.StatusCode, raw)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error   string `json:"error"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(envelope.Value, &e)
		return fmt.Errorf("webdriver %s %s: HTTP %d %s: %s", method, url, resp.StatusCode, e.Error, firstLine(e.Message))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(envelope.Value, out); err != nil {
		return fmt.Errorf("webdriver %s %s: decode %.300s: %w", method, url, envelope.Value, err)
	}
	return nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func (s *session) do(method, path string, body, out any) {
	s.t.Helper()
	if err := call(method, s.base+path, body, out); err != nil {
		s.t.Fatal(err)
	}
}

// open navigates to url and waits for the page to load.
func (s *session) open(url string) {
	s.t.Helper()
	s.do(http.MethodPost, "/url", map[string]string{"url": url}, nil)
}

// exec runs script (a function body; arguments in `arguments`) in the page
// and decodes what it returns into out.
func (s *session) exec(out any, script string, args ...any) {
	s.t.Helper()
	if args == nil {
		args = []any{}
	}
	s.do(http.MethodPost, "/execute/sync", map[string]any{"script": script, "args": args}, out)
}

// find returns the reference of the first element matching css, or fails.
func (s *session) find(css string) string {
	s.t.Helper()
	var ref map[string]string
	s.do(http.MethodPost, "/element", map[string]string{"using": "css selector", "value": css}, &ref)
	return ref[elementKey]
}

// findAll returns the references of every element matching css.
func (s *session) findAll(css string) []string {
	s.t.Helper()
	var refs []map[string]string
	s.do(http.MethodPost, "/elements", map[string]string{"using": "css selector", "value": css}, &refs)
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r[elementKey]
	}
	return out
}

// text is the rendered text of an element.
func (s *session) text(elem string) string {
	s.t.Helper()
	var text string
	s.do(http.MethodGet, "/element/"+elem+"/text", nil, &text)
	return text
}

// textOf is the rendered text of the first element matching css.
func (s *session) textOf(css string) string {
	s.t.Helper()
	return s.text(s.find(css))
}

// attr is an element's attribute, "" when absent.
func (s *session) attr(elem, name string) string {
	s.t.Helper()
	var v *string
	s.do(http.MethodGet, "/element/"+elem+"/attribute/"+name, nil, &v)
	if v == nil {
		return ""
	}
	return *v
}

func (s *session) click(elem string) {
	s.t.Helper()
	s.do(http.MethodPost, "/element/"+elem+"/click", map[string]any{}, nil)
}

// typeInto clears an input and types text into it.
func (s *session) typeInto(elem, text string) {
	s.t.Helper()
	s.do(http.MethodPost, "/element/"+elem+"/clear", map[string]any{}, nil)
	s.do(http.MethodPost, "/element/"+elem+"/value", map[string]string{"text": text}, nil)
}

// resize sets the window's outer size.
func (s *session) resize(width, height int) {
	s.t.Helper()
	s.do(http.MethodPost, "/window/rect", map[string]int{"width": width, "height": height}, nil)
}

// screenshot is a PNG of the window's viewport.
func (s *session) screenshot() []byte {
	s.t.Helper()
	var b64 string
	s.do(http.MethodGet, "/screenshot", nil, &b64)
	png, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		s.t.Fatalf("screenshot: %v", err)
	}
	return png
}

// logEntry is one message of the browser's console log.
type logEntry struct {
	Level   string `json:"level"`
	Message string `json:"message"`
	Source  string `json:"source"`
}

// browserLog drains the browser's console log (a chromedriver extension of
// the protocol, enabled by the goog:loggingPrefs capability).
func (s *session) browserLog() []logEntry {
	s.t.Helper()
	var entries []logEntry
	s.do(http.MethodPost, "/se/log", map[string]string{"type": "browser"}, &entries)
	return entries
}

// eventually polls cond every 100 ms until it holds or timeout passes; then
// it fails with cond's last description of what it saw.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last saw %s", what, timeout, saw)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
