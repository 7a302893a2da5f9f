package cli

import (
	"testing"

	"github.com/foliodb/folio/client"
	"github.com/foliodb/folio/internal/bookie/server"
)

// minNumRacksPerWriteQuorum ≤ 0 asks for no racks in Java (min(Qw,
// value)): AutoRecovery places and judges with one rack, not with
// placement's default of two that a zero would otherwise mean.
func TestBookiePlacementMinRacksNotPositive(t *testing.T) {
	for _, v := range []int{0, -3} {
		pc := server.DefaultConfig().Placement
		pc.MinNumRacksPerWriteQuorum = v
		src, clientCfg, err := bookiePlacement(pc, nil)
		if err != nil {
			t.Fatal(err)
		}
		var c client.Config
		clientCfg(&c)
		if src.Config.MinRacksPerWriteQuorum != 1 || c.MinNumRacksPerWriteQuorum != 1 {
			t.Errorf("minNumRacksPerWriteQuorum=%d: source %d, client %d, want 1 and 1", v, src.Config.MinRacksPerWriteQuorum, c.MinNumRacksPerWriteQuorum)
		}
	}
}
