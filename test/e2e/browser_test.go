package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// browser is a headless Chromium with its own profile (cookies, storage).
type browser struct {
	t   *testing.T
	ctx context.Context
	// shots is where screenshots go.
	shots string
}

// newBrowser starts Debian's chromium; the test is skipped where it is not installed.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed: the console's browser tests need Debian's chromium package")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1366, 900))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	shots := os.Getenv("GALE_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, ctx: ctx, shots: shots}
}

// tab opens another tab of the same profile.
func (b *browser) tab() *browser {
	ctx, cancel := chromedp.NewContext(b.ctx)
	b.t.Cleanup(cancel)
	// The first run opens the tab and ties it to its context: one without a deadline.
	if err := chromedp.Do(ctx); err != nil {
		b.t.Fatalf("open a tab: %v", err)
	}
	return &browser{t: b.t, ctx: ctx, shots: b.shots}
}

// run runs steps, failing the test (with a screenshot) after within.
func (b *browser) run(within time.Duration, what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, within)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.failed(what, err)
	}
}

// get runs an action that reads a value.
func get[T any](b *browser, within time.Duration, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, within)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.failed(what, err)
	}
	return v
}

func (b *browser) failed(what string, err error) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	url, _ := chromedp.Run(ctx, chromedp.Location())
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	b.screenshot("failed-" + strings.ReplaceAll(what, " ", "-"))
	b.t.Fatalf("%s: %v\nat %s:\n%s", what, err, url, text)
}

// screenshot saves the whole page as name.png (quality 100 is PNG, anything less JPEG).
func (b *browser) screenshot(name string) {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	_ = os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644)
}

// theme sets the colour scheme the page is shown in.
func (b *browser) theme(scheme string) {
	b.run(10*time.Second, "theme "+scheme, func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
		return chromedp.Void{}, err
	})
}

// shoot saves the page in the light and the dark theme and fails the test on an accessibility
// violation axe-core calls serious or critical.
func (b *browser) shoot(name string) {
	b.t.Helper()
	b.weigh(name)
	for _, scheme := range []string{"light", "dark"} {
		b.theme(scheme)
		b.screenshot(name + "-" + scheme)
		b.axe(name + " (" + scheme + ")")
	}
	b.theme("light")
}

// maxPageWeight is the most a main page may weigh on a first visit, compressed.
const maxPageWeight = 250 << 10

// weigh records what the page transferred compressed on a first visit (its HTML and every
// script, stylesheet and image it loaded, cached or not), and fails the test above
// maxPageWeight.
func (b *browser) weigh(name string) {
	b.t.Helper()
	bytes := get(b, 10*time.Second, "weigh "+name, chromedp.Evaluate[int](`(() => {
		const nav = performance.getEntriesByType("navigation")[0];
		let n = nav ? nav.encodedBodySize : 0;
		for (const r of performance.getEntriesByType("resource")) {
			if (["script", "link", "css", "img"].includes(r.initiatorType)) n += r.encodedBodySize;
		}
		return n;
	})()`))
	b.t.Logf("page weight %s: %d bytes", name, bytes)
	line := fmt.Sprintf("%s %d\n", name, bytes)
	if f, err := os.OpenFile(filepath.Join(b.shots, "weights.txt"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
		f.WriteString(line)
		f.Close()
	}
	if bytes > maxPageWeight {
		b.t.Errorf("%s weighs %d bytes compressed, more than %d", name, bytes, maxPageWeight)
	}
}

var axeSource string

// axe runs axe-core (vendored from npm) in the page.
func (b *browser) axe(what string) {
	b.t.Helper()
	if axeSource == "" {
		src, err := os.ReadFile("testdata/axe.min.js")
		if err != nil {
			b.t.Fatal(err)
		}
		axeSource = string(src)
	}
	b.run(30*time.Second, "load axe", eval(axeSource))
	violations := get(b, 60*time.Second, "axe on "+what, chromedp.Evaluate[[]axeViolation](
		`axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations)`, chromedp.EvalAwaitPromise))
	for _, v := range violations {
		if v.Impact == "serious" || v.Impact == "critical" {
			targets, _ := json.Marshal(v.Nodes)
			b.t.Errorf("%s: accessibility: %s (%s): %s at %s", what, v.ID, v.Impact, v.Help, targets)
		}
	}
}

type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target []any `json:"target"`
	} `json:"nodes"`
}

// eval runs a script in the page for its effect.
func eval(script string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Evaluate[any](script, chromedp.EvalIgnoreExceptions)(ctx, t)
		return chromedp.Void{}, err
	}
}

// typeLine types a line and Enter into the focused element as a person's keyboard would
// reach a terminal: the text as input (not as key events, which a terminal would take twice:
// on keydown and on keypress), then Enter as a key without text.
func typeLine(line string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		if _, err := cdp.Call(ctx, t, input.InsertText, input.InsertTextParams{Text: line}); err != nil {
			return chromedp.Void{}, err
		}
		for _, typ := range []input.DispatchKeyEventType{input.DispatchKeyEventTypeRawKeyDown, input.DispatchKeyEventTypeKeyUp} {
			if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, input.DispatchKeyEventParams{Type: typ, Key: "Enter", Code: "Enter",
				WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13}); err != nil {
				return chromedp.Void{}, err
			}
		}
		return chromedp.Void{}, nil
	}
}

// cookie returns the value of a cookie of the browser's profile.
func (b *browser) cookie(name string) string {
	res := get(b, 10*time.Second, "read cookies", func(ctx context.Context, t *chromedp.Target) (network.GetCookiesResult, error) {
		return cdp.Call(ctx, t, network.GetCookies, network.GetCookiesParams{})
	})
	for _, c := range res.Cookies {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

// location is the tab's URL.
func (b *browser) location() string {
	return get(b, 10*time.Second, "read the location", chromedp.Location())
}

// attr is an attribute of the first element sel matches.
func (b *browser) attr(sel, name string) string {
	return get(b, 10*time.Second, "read "+name+" of "+sel, chromedp.AttributeValue(chromedp.CSS(sel), name)).Value
}

// signIn signs in through the form; code, when set, answers the second step.
func (b *browser) signIn(base, email, password string, code func() string) {
	b.t.Helper()
	b.run(30*time.Second, "sign in",
		chromedp.WaitVisible(chromedp.CSS(`#email`)),
		chromedp.SendKeys(chromedp.CSS(`#email`), email),
		chromedp.SendKeys(chromedp.CSS(`#password`), password),
		chromedp.Click(chromedp.CSS(`form[action="/signin"] button[type=submit]`)))
	if code != nil {
		b.run(30*time.Second, "second step",
			chromedp.WaitVisible(chromedp.CSS(`#code`)),
			chromedp.SendKeys(chromedp.CSS(`#code`), code()),
			chromedp.Click(chromedp.CSS(`form[action="/signin/mfa"] button[type=submit]`)))
	}
	b.run(30*time.Second, "signed in", chromedp.WaitVisible(chromedp.CSS(`form[action="/signout"]`)))
}

// status answers the HTTP status of a GET of path with the browser's session cookie.
func (b *browser) status(base, path string) int {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	req.AddCookie(&http.Cookie{Name: "gale_session", Value: b.cookie("gale_session")})
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// navigate loads a page of the server.
func (b *browser) navigate(url string) {
	b.t.Helper()
	b.run(30*time.Second, "open "+url, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("body")))
}

func textOf(sel string) string {
	return fmt.Sprintf(`document.querySelector(%q)?.textContent ?? ""`, sel)
}

// waitText waits until the element sel shows text containing want.
func (b *browser) waitText(within time.Duration, what, sel, want string) {
	b.t.Helper()
	b.run(within, what, func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		for {
			got, err := chromedp.Evaluate[string](textOf(sel))(ctx, t)
			if err != nil {
				return chromedp.Void{}, err
			}
			if strings.Contains(got, want) {
				return chromedp.Void{}, nil
			}
			select {
			case <-ctx.Done():
				return chromedp.Void{}, fmt.Errorf("%s never showed %q (last: %q)", sel, want, got)
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
}
