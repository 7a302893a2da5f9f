package standalone

import (
	"strings"
	"testing"
)

// Validate reports what Run would refuse, before anything starts.
func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Bookies: -1}, "--bookies"},
		{Config{HTTPPort: 70000}, "port 70000"},
		{Config{Bookies: 3, BookiePortBase: 65534}, "pass 65535"},
	} {
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want an error naming %q", c.cfg, err, c.want)
		}
	}
	if err := (Config{Bookies: 3, DataDir: t.TempDir()}).Validate(); err != nil {
		t.Errorf("Validate of a good configuration: %v", err)
	}
}
