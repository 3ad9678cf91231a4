// Command benchtable turns the output of the server's limit benchmarks
// (go test -bench 'Limit' ./server/) into one table: for each benchmark
// the median over its -count runs of every figure it reports, the same-run
// limit and their ratio. With -llama-server it also runs llama.cpp's own
// server on the same models with the same flags (-t 2 -np max(8, clients),
// 512 positions a slot) and the same load (streaming /completion, 128
// tokens a request, ignore_eos, all clients at once) for the throughput
// rows, and adds its figures.
//
//	go test -run '^$' -bench Limit -benchtime 1x -count 3 ./server/ | tee bench.txt
//	go run ./internal/cmd/benchtable [-llama-server PATH] bench.txt
//
// It is a developer tool for this repository's benchmarks (it knows their
// names and metrics and makes the 125M model with internal/gguf), so it
// lives under internal/cmd rather than examples/, which are for users of
// the SDK.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func main() {
	llamaServer := flag.String("llama-server", "", "path of llama-server to run side by side for the throughput rows")
	models := flag.String("models", "../shared/models", "folder of stories260K.gguf and llama-2-tiny-random.gguf")
	rounds := flag.Int("rounds", 3, "rounds of each llama-server throughput row (the median is shown)")
	flag.Parse()
	var in io.Reader = os.Stdin
	if flag.NArg() > 0 {
		var rs []io.Reader
		for _, name := range flag.Args() {
			f, err := os.Open(name)
			if err != nil {
				fmt.Fprintln(os.Stderr, "benchtable:", err)
				os.Exit(1)
			}
			defer f.Close()
			rs = append(rs, f)
		}
		in = io.MultiReader(rs...)
	}
	rows, err := parse(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	var side map[string]float64
	if *llamaServer != "" {
		side, err = runLlamaServer(*llamaServer, *models, rows, *rounds)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchtable:", err)
			os.Exit(1)
		}
	}
	write(os.Stdout, rows, side)
}

// row is one benchmark: its metrics, each with the values of its runs.
type row struct {
	name    string
	units   []string // in the order first seen
	metrics map[string][]float64
}

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

// parse reads go test -bench output and gathers the metrics of each
// benchmark over its runs, in the order the benchmarks first appear.
func parse(r io.Reader) ([]*row, error) {
	var rows []*row
	byName := map[string]*row{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		rw := byName[m[1]]
		if rw == nil {
			rw = &row{name: m[1], metrics: map[string][]float64{}}
			byName[m[1]] = rw
			rows = append(rows, rw)
		}
		f := strings.Fields(m[2])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: metric %q: %w", m[1], f[i], err)
			}
			unit := f[i+1]
			if unit == "ns/op" {
				continue // these benchmarks report their own figures
			}
			if _, ok := rw.metrics[unit]; !ok {
				rw.units = append(rw.units, unit)
			}
			rw.metrics[unit] = append(rw.metrics[unit], v)
		}
	}
	return rows, sc.Err()
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// order puts the figure first, then other figures, then limits, then ratios.
func order(units []string) []string {
	rank := func(u string) int {
		switch {
		case u == "tok/s":
			return 0
		case strings.HasPrefix(u, "limit"):
			return 2
		case strings.Contains(u, "ratio") || strings.Contains(u, "/median"):
			return 3
		}
		return 1
	}
	out := slices.Clone(units)
	slices.SortStableFunc(out, func(a, b string) int { return rank(a) - rank(b) })
	return out
}

func format(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// write prints the table in Markdown: one line per benchmark, its figures
// as "unit value" pairs (medians), and the runs they are the median of.
func write(w io.Writer, rows []*row, side map[string]float64) {
	fmt.Fprintln(w, "| benchmark | figures (median of runs) | runs |")
	fmt.Fprintln(w, "| --- | --- | --- |")
	for _, r := range rows {
		var parts []string
		runs := 0
		for _, u := range order(r.units) {
			parts = append(parts, fmt.Sprintf("%s %s", u, format(median(r.metrics[u]))))
			runs = max(runs, len(r.metrics[u]))
		}
		if v, ok := side[r.name]; ok {
			parts = append(parts, fmt.Sprintf("llama-server tok/s %s", format(v)))
			if lim := median(r.metrics["limit-tok/s"]); lim > 0 {
				parts = append(parts, fmt.Sprintf("llama-server ratio %s", format(v/lim)))
			}
		}
		fmt.Fprintf(w, "| %s | %s | %d |\n", strings.TrimPrefix(r.name, "Benchmark"), strings.Join(parts, ", "), runs)
	}
}
