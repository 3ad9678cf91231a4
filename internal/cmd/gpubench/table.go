package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/x/llama/engine"
	"github.com/x/llama/internal/benchlimit"
)

// scrapeSteps reads the engine loop's time by phase and its steps from
// the server's /metrics (llamacpp:step_seconds_total, n_decode_total).
func scrapeSteps(url string) (engine.StepTimes, error) {
	var st engine.StepTimes
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("status %d", resp.StatusCode)
	}
	seen := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			continue
		}
		if name == "llamacpp:n_decode_total" {
			st.Steps = int64(f)
			continue
		}
		phase, ok := strings.CutPrefix(name, `llamacpp:step_seconds_total{phase="`)
		if !ok {
			continue
		}
		phase = strings.TrimSuffix(phase, `"}`)
		for p := range engine.NumStepPhases {
			if p.String() == phase {
				st.Phase[p] = time.Duration(f * float64(time.Second))
				seen++
			}
		}
	}
	if err := sc.Err(); err != nil {
		return st, err
	}
	if seen != int(engine.NumStepPhases) {
		return st, fmt.Errorf("%d of the %d llamacpp:step_seconds_total series", seen, engine.NumStepPhases)
	}
	return st, nil
}

// printTable writes the rows as a Markdown table.
func printTable(w io.Writer, rows []row) {
	fmt.Fprintln(w, tableHeader)
	for _, r := range rows {
		fmt.Fprintln(w, r.line())
	}
}

// pairedRatio is the median over the rounds of ours/llama-server in each
// round, the two having run one right after the other (0: none): on a
// machine whose speed changes from minute to minute it moves less than
// the ratio of the totals, which a slow spell in one round sways.
func pairedRatio(ours, ref []float64) float64 {
	var rs []float64
	for k := range min(len(ours), len(ref)) {
		if ours[k] > 0 && ref[k] > 0 {
			rs = append(rs, ours[k]/ref[k])
		}
	}
	if len(rs) == 0 {
		return 0
	}
	slices.Sort(rs)
	if n := len(rs); n%2 == 0 {
		return (rs[n/2-1] + rs[n/2]) / 2
	}
	return rs[len(rs)/2]
}

const tableHeader = "| model | clients | stream | limit tok/s | ours tok/s | llama-server tok/s | ours/llama-server | paired p50 | ours/limit " +
	"| ours TTFT p50 / p99 ms | llama-server TTFT p50 / p99 ms " +
	"| step µs | start+batch | submit | wait | sample | emit | other | idle % |\n" +
	"| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"

// line is the row's line of the table.
func (r row) line() string {
	num := func(v float64) string {
		if v == 0 {
			return "-"
		}
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	ratio := func(a, b float64) string {
		if a == 0 || b == 0 {
			return "-"
		}
		return strconv.FormatFloat(a/b, 'f', 2, 64)
	}
	ttft := func(s side) string {
		if len(s.ttft) == 0 {
			return "-"
		}
		ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) }
		return ms(benchlimit.Quantile(s.ttft, 0.5)) + " / " + ms(benchlimit.Quantile(s.ttft, 0.99))
	}
	st := r.steps
	per := func(ps ...engine.StepPhase) string {
		if st.Steps <= 0 {
			return "-"
		}
		var d time.Duration
		for _, p := range ps {
			d += st.Phase[p]
		}
		return strconv.FormatFloat(float64(d)/1e3/float64(st.Steps), 'f', 0, 64)
	}
	// The idle share is of the rounds' wall time: /metrics counts an idle
	// spell once it ends, so the difference of two scrapes taken while the
	// engine sleeps holds the spell before the round (the pause between
	// rounds) and not the one after it.
	idle := "-"
	if t := r.ours.took; t > 0 && st.Total() > 0 {
		working := st.Total() - st.Phase[engine.PhaseIdle] - st.Phase[engine.PhaseGather]
		idle = strconv.FormatFloat(max(0, 100*(1-float64(working)/float64(t))), 'f', 0, 64)
	}
	paired := "-"
	if p := pairedRatio(r.ours.rounds, r.ref.rounds); p > 0 {
		paired = strconv.FormatFloat(p, 'f', 2, 64)
	}
	return fmt.Sprintf("| %s | %d | %v | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |",
		r.model, r.clients, r.stream, num(r.limit), num(r.ours.tokS()), num(r.ref.tokS()),
		ratio(r.ours.tokS(), r.ref.tokS()), paired, ratio(r.ours.tokS(), r.limit), ttft(r.ours), ttft(r.ref),
		per(engine.PhaseStart, engine.PhaseBatch, engine.PhaseDecodeSubmit, engine.PhaseDecodeWait,
			engine.PhaseSample, engine.PhaseEmit, engine.PhaseOther),
		per(engine.PhaseStart, engine.PhaseBatch), per(engine.PhaseDecodeSubmit), per(engine.PhaseDecodeWait),
		per(engine.PhaseSample), per(engine.PhaseEmit), per(engine.PhaseOther), idle)
}
