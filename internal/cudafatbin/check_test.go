package cudafatbin

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// npmFacts are the facts of the npm CUDA build (node-llama-cpp 3.21.1).
var npmFacts = Facts{SASS: []int{86, 89, 120, 121},
	PTX: []PTX{{75, Version{9, 1}}, {80, Version{9, 1}}, {90, Version{9, 1}}}}

func TestCheck(t *testing.T) {
	v130, v131 := Version{13, 0}, Version{13, 1}
	tests := []struct {
		name   string
		facts  Facts
		cc     Version
		driver Version
		want   Verdict
	}{
		{"sm_90 on a 13.0 driver: the PTX needs 13.1", npmFacts, Version{9, 0}, v130,
			Verdict{PTX: 90, NeedDriver: v131, ISA: Version{9, 1}}},
		{"sm_90 on a 13.1 driver: JIT of compute_90", npmFacts, Version{9, 0}, v131, Verdict{OK: true, PTX: 90}},
		{"sm_89: its own SASS", npmFacts, Version{8, 9}, v130, Verdict{OK: true, SASS: 89}},
		{"sm_87: sm_86 SASS runs within the major", npmFacts, Version{8, 7}, v130, Verdict{OK: true, SASS: 86}},
		{"sm_80 on 13.0: only PTX, too new", npmFacts, Version{8, 0}, v130,
			Verdict{PTX: 80, NeedDriver: v131, ISA: Version{9, 1}}},
		{"sm_70: no code at all", npmFacts, Version{7, 0}, v131, Verdict{}},
		{"sm_100 on 13.1: compute_90 PTX", npmFacts, Version{10, 0}, v131, Verdict{OK: true, PTX: 90}},
		{"sm_121: its own SASS", npmFacts, Version{12, 1}, v130, Verdict{OK: true, SASS: 121}},
		{"sm_103 on 13.0: no 10.x SASS, PTX too new", npmFacts, Version{10, 3}, v130,
			Verdict{PTX: 90, NeedDriver: v131, ISA: Version{9, 1}}},
		{"older PTX runs on a newer driver", Facts{PTX: []PTX{{80, Version{8, 8}}}}, Version{9, 0}, v130,
			Verdict{OK: true, PTX: 80}},
		{"the lowest driver among the PTX", Facts{PTX: []PTX{{75, Version{9, 0}}, {80, Version{9, 1}}}}, Version{9, 0},
			Version{12, 9}, Verdict{PTX: 75, NeedDriver: v130, ISA: Version{9, 0}}},
		{"a newer ISA than the table", Facts{PTX: []PTX{{90, Version{9, 4}}}}, Version{9, 0}, v131,
			Verdict{PTX: 90, NeedDriver: Version{13, 4}, ISA: Version{9, 4}}},
		{"no facts", Facts{}, Version{9, 0}, v131, Verdict{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Check(tt.facts, tt.cc, tt.driver))
		})
	}
}

func TestMinDriver(t *testing.T) {
	for isa, want := range map[Version]Version{
		{9, 1}: {13, 1}, {9, 0}: {13, 0}, {8, 8}: {12, 9}, {8, 6}: {12, 7}, {8, 5}: {12, 5},
		{7, 0}: {11, 0}, {9, 3}: {13, 3}, {5, 0}: {9, 0},
	} {
		assert.Equal(t, want, MinDriver(isa), "ISA %v", isa)
	}
	assert.Equal(t, Version{13, 0}, DriverVersion(13000))
	assert.Equal(t, Version{12, 9}, DriverVersion(12090))
}
