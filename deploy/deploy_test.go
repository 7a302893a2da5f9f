// Package deploy holds what runs Folio outside this repository: the
// container image (Dockerfile), Kubernetes manifests (kubernetes/), a
// systemd unit (systemd/) and a Grafana dashboard (grafana/). Nothing here
// can be run on a test machine (no image builder, no cluster), so these
// tests check the files statically against the code they name: every
// manifest parses, every folio command line parses as the binary would
// parse it, every probe path is served by the admin HTTP server, and every
// configuration key is one the bookie reads.
package deploy_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/foliodb/folio/internal/bookie/server"
	"github.com/foliodb/folio/internal/cli"
)

// object is one Kubernetes object, as parsed from YAML.
type object = map[string]any

// manifests parses every document of every deploy/kubernetes/*.yaml.
func manifests(t *testing.T) map[string][]object {
	t.Helper()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/kubernetes: %v", err)
	}
	out := map[string][]object{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			var o object
			if err := yaml.UnmarshalStrict([]byte(doc), &o); err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			for _, field := range []string{"apiVersion", "kind"} {
				if s, _ := o[field].(string); s == "" {
					t.Errorf("%s document %d has no %s", f, i, field)
				}
			}
			if name, _ := get(o, "metadata", "name").(string); name == "" {
				t.Errorf("%s document %d has no metadata.name", f, i)
			}
			out[f] = append(out[f], o)
		}
	}
	return out
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// get walks nested maps by keys; nil when a step is missing.
func get(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

// folioContainer is a container that runs the folio image.
type folioContainer struct {
	where string
	spec  map[string]any
	// pod is the pod spec holding it.
	pod map[string]any
}

func folioContainers(t *testing.T, objs map[string][]object) []folioContainer {
	var out []folioContainer
	for f, docs := range objs {
		for _, o := range docs {
			pod, _ := get(o, "spec", "template", "spec").(map[string]any)
			for _, c := range list(get(pod, "containers")) {
				cm, _ := c.(map[string]any)
				if img, _ := cm["image"].(string); strings.Contains(img, "folio") {
					out = append(out, folioContainer{where: f + " " + o["kind"].(string) + "/" + get(o, "metadata", "name").(string), spec: cm, pod: pod})
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no container runs the folio image")
	}
	return out
}

// parseFolioArgs parses args as `folio args...` would be parsed: the command
// must exist, take its flags, and accept its positional arguments. It
// returns the command's path.
func parseFolioArgs(t *testing.T, where string, args []string) string {
	t.Helper()
	root := cli.NewRootCommand(cli.Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }})
	cmd, rest, err := root.Find(args)
	if err != nil {
		t.Errorf("%s: folio %v: %v", where, args, err)
		return ""
	}
	if cmd == root || !cmd.Runnable() {
		t.Errorf("%s: folio %v names no runnable command", where, args)
		return ""
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Errorf("%s: folio %v: %v", where, args, err)
		return ""
	}
	if cmd.Args != nil {
		if err := cmd.Args(cmd, cmd.Flags().Args()); err != nil {
			t.Errorf("%s: folio %v: %v", where, args, err)
		}
	}
	return cmd.CommandPath()
}

// setArgs returns the key=value pairs of the --set flags in args.
func setArgs(args []string) []string {
	var out []string
	for i, a := range args {
		switch {
		case a == "--set" && i+1 < len(args):
			out = append(out, args[i+1])
		case strings.HasPrefix(a, "--set="):
			out = append(out, strings.TrimPrefix(a, "--set="))
		}
	}
	return out
}

// checkConfig loads a bk_server.conf text and key=value settings as the
// bookie does and fails on any warning (an unknown or misspelt key) or
// error.
func checkConfig(t *testing.T, where, conf string, sets []string) {
	t.Helper()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := server.DefaultConfig()
	if err := cfg.Load(strings.NewReader(conf), log); err != nil {
		t.Errorf("%s: %v", where, err)
	}
	for _, kv := range sets {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			t.Errorf("%s: --set %q is not key=value", where, kv)
			continue
		}
		if err := cfg.Set(k, v, log); err != nil {
			t.Errorf("%s: --set %s: %v", where, kv, err)
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("%s: %v", where, err)
	}
	if logs.Len() > 0 {
		t.Errorf("%s: the bookie warns about this configuration:\n%s", where, logs.String())
	}
}

// adminStatus is the status the admin HTTP server answers path with.
func adminStatus(t *testing.T, path string) int {
	h := server.NewAdminHandler(prometheus.NewRegistry(), func() []server.AdminTarget { return nil }, server.AdminOptions{})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code
}

// TestKubernetesManifests: the manifests parse; the bookie StatefulSet has
// persistent volumes for the journal and the ledgers, probes on routes the
// admin HTTP server serves (readiness is_ready, liveness state), and a
// configuration the bookie reads without a warning; the init Job
// initialises the cluster idempotently; every folio command line parses.
func TestKubernetesManifests(t *testing.T) {
	objs := manifests(t)
	var sawBookie, sawInit bool
	for _, c := range folioContainers(t, objs) {
		args := []string{}
		for _, a := range list(c.spec["args"]) {
			args = append(args, a.(string))
		}
		if c.spec["command"] != nil {
			t.Errorf("%s: the folio image's entrypoint is the binary; give args, not command", c.where)
		}
		switch parseFolioArgs(t, c.where, args) {
		case "folio bookie":
			sawBookie = true
			checkBookie(t, c, args, objs)
		case "folio shell initnewcluster":
			sawInit = true
			if !strings.Contains(strings.Join(args, " "), "--if-absent") {
				t.Errorf("%s: an init job reruns: initnewcluster needs --if-absent", c.where)
			}
		}
		if sc := get(c.pod, "securityContext", "runAsNonRoot"); sc != true {
			t.Errorf("%s: runAsNonRoot is %v, want true", c.where, sc)
		}
	}
	if !sawBookie || !sawInit {
		t.Errorf("want a bookie StatefulSet (%v) and an initnewcluster Job (%v)", sawBookie, sawInit)
	}
}

func checkBookie(t *testing.T, c folioContainer, args []string, objs map[string][]object) {
	probes := map[string]string{}
	for _, p := range []string{"readinessProbe", "livenessProbe"} {
		path, _ := get(c.spec, p, "httpGet", "path").(string)
		probes[p] = path
		if code := adminStatus(t, path); code == http.StatusNotFound || code == http.StatusMethodNotAllowed {
			t.Errorf("%s: %s GET %s: the admin HTTP server answers %d", c.where, p, path, code)
		}
	}
	if probes["readinessProbe"] != "/api/v1/bookie/is_ready" || probes["livenessProbe"] != "/api/v1/bookie/state" {
		t.Errorf("%s: probes %v, want readiness /api/v1/bookie/is_ready and liveness /api/v1/bookie/state", c.where, probes)
	}
	// The configuration: the ConfigMap mounted at --conf's directory.
	conf := ""
	for i, a := range args {
		if a == "--conf" && i+1 < len(args) {
			conf = args[i+1]
		}
	}
	mounts := map[string]string{}
	for _, m := range list(c.spec["volumeMounts"]) {
		mounts[get(m, "name").(string)] = get(m, "mountPath").(string)
	}
	var confText string
	for _, v := range list(get(c.pod, "volumes")) {
		cmName, _ := get(v, "configMap", "name").(string)
		if cmName == "" || filepath.Dir(conf) != mounts[get(v, "name").(string)] {
			continue
		}
		for _, docs := range objs {
			for _, o := range docs {
				if o["kind"] == "ConfigMap" && get(o, "metadata", "name") == cmName {
					confText, _ = get(o, "data", filepath.Base(conf)).(string)
				}
			}
		}
	}
	if confText == "" {
		t.Fatalf("%s: --conf %s is not a ConfigMap key mounted there", c.where, conf)
	}
	checkConfig(t, c.where+" "+conf, confText, setArgs(args))
	cfg := server.DefaultConfig()
	_ = cfg.Load(strings.NewReader(confText), slog.New(slog.DiscardHandler))
	if !cfg.HTTPServerEnabled {
		t.Errorf("%s: the probes need httpServerEnabled=true", c.where)
	}
	// Journal and ledgers on persistent volumes of the StatefulSet.
	claims := map[string]bool{}
	for _, docs := range objs {
		for _, o := range docs {
			if o["kind"] == "StatefulSet" && strings.HasSuffix(c.where, "StatefulSet/"+get(o, "metadata", "name").(string)) {
				for _, vc := range list(get(o, "spec", "volumeClaimTemplates")) {
					claims[get(vc, "metadata", "name").(string)] = true
				}
			}
		}
	}
	for _, dirs := range [][]string{cfg.JournalDirs, cfg.LedgerDirs} {
		for _, d := range dirs {
			ok := false
			for name, path := range mounts {
				if claims[name] && (d == path || strings.HasPrefix(d, path+"/")) {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s: %s is not on a persistent volume claim", c.where, d)
			}
		}
	}
}

// dockerInstructions returns the Dockerfile's instructions of the final
// stage, continuation lines joined, keyed by instruction.
func dockerInstructions(t *testing.T) map[string][]string {
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	out := map[string][]string{}
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		ins, rest, _ := strings.Cut(l, " ")
		ins = strings.ToUpper(ins)
		if ins == "FROM" {
			out = map[string][]string{"FROM": {rest}} // a new stage
			continue
		}
		out[ins] = append(out[ins], strings.TrimSpace(rest))
	}
	return out
}

func jsonArgs(t *testing.T, what, s string) []string {
	var args []string
	if err := json.Unmarshal([]byte(s), &args); err != nil {
		t.Fatalf("%s %s: want the exec (JSON array) form: %v", what, s, err)
	}
	return args
}

// TestDockerfile: the final stage runs the static binary as a non-root
// user; its command, health check and configuration parse as folio parses
// them.
func TestDockerfile(t *testing.T) {
	ins := dockerInstructions(t)
	if user := ins["USER"]; len(user) == 0 || strings.HasPrefix(user[len(user)-1], "0") || strings.HasPrefix(user[len(user)-1], "root") {
		t.Errorf("the image runs as %v, want a non-root user", user)
	}
	entry := jsonArgs(t, "ENTRYPOINT", ins["ENTRYPOINT"][0])
	if len(entry) != 1 || filepath.Base(entry[0]) != "folio" {
		t.Fatalf("ENTRYPOINT %v, want the folio binary", entry)
	}
	cmdArgs := jsonArgs(t, "CMD", ins["CMD"][0])
	if parseFolioArgs(t, "Dockerfile CMD", cmdArgs) != "folio bookie" {
		t.Errorf("CMD %v does not run a bookie", cmdArgs)
	}
	hc := ins["HEALTHCHECK"]
	if len(hc) != 1 {
		t.Fatalf("HEALTHCHECK: %v", hc)
	}
	_, exec, ok := strings.Cut(hc[0], "CMD ")
	if !ok {
		t.Fatalf("HEALTHCHECK %q has no CMD", hc[0])
	}
	hcArgs := jsonArgs(t, "HEALTHCHECK CMD", exec)
	if hcArgs[0] != entry[0] || parseFolioArgs(t, "Dockerfile HEALTHCHECK", hcArgs[1:]) != "folio shell bookiesanity" {
		t.Errorf("HEALTHCHECK %v: want %s shell bookiesanity --conf …", hcArgs, entry[0])
	}
	// The configuration the image carries.
	conf, err := os.ReadFile("bk_server.conf")
	if err != nil {
		t.Fatal(err)
	}
	checkConfig(t, "deploy/bk_server.conf", string(conf), nil)
	copied := false
	for _, c := range ins["COPY"] {
		copied = copied || strings.Contains(c, "deploy/bk_server.conf")
	}
	if !copied {
		t.Error("the image does not carry deploy/bk_server.conf")
	}
}

// TestSystemdUnit: the unit runs folio bookie as an unprivileged user with
// a stop timeout longer than the bookie's graceful shutdown.
func TestSystemdUnit(t *testing.T) {
	b, err := os.ReadFile("systemd/folio-bookie.service")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			keys[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	if u := keys["User"]; u == "" || u == "root" {
		t.Errorf("User=%q, want an unprivileged user", u)
	}
	exec := strings.Fields(keys["ExecStart"])
	if len(exec) < 2 || filepath.Base(exec[0]) != "folio" || parseFolioArgs(t, "ExecStart", exec[1:]) != "folio bookie" {
		t.Errorf("ExecStart=%q, want folio bookie --conf …", keys["ExecStart"])
	}
	if keys["TimeoutStopSec"] == "" || keys["Restart"] == "" {
		t.Errorf("TimeoutStopSec=%q Restart=%q", keys["TimeoutStopSec"], keys["Restart"])
	}
}
