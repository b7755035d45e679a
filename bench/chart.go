package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// chartCells are the cells the chart shows, one bar each per system.
var chartCells = []struct {
	workload string
	clients  int
	color    color.RGBA
}{
	{workloadZipf, 64, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}},
	{workloadHotKey, 64, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}},
}

// drawChart writes a PNG of two panels side by side: throughput and p99
// latency of every system in the chart's cells, both on log scales.
func drawChart(path string, results []result) error {
	var systems []string
	for _, r := range results {
		if r.Workload == chartCells[0].workload && r.Clients == chartCells[0].clients {
			systems = append(systems, r.System)
		}
	}
	if len(systems) == 0 {
		return nil // the run had no such cells
	}
	ops, err := panel(results, systems, "Throughput at 64 clients (higher is better)", "operations per second",
		func(r result) float64 { return r.OpsPerSec })
	if err != nil {
		return err
	}
	p99, err := panel(results, systems, "p99 latency at 64 clients (lower is better)", "p99 latency (µs)",
		func(r result) float64 { return r.P99 })
	if err != nil {
		return err
	}
	const w, h = 30 * vg.Centimeter, 12 * vg.Centimeter
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Centimeter}
	ops.Draw(tiles.At(dc, 0, 0))
	p99.Draw(tiles.At(dc, 1, 0))
	if dir := filepath.Dir(path); dir != "." {
		os.MkdirAll(dir, 0o755)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// panel returns a grouped bar chart of metric per system, one group per
// chart cell. Bars are drawn as decades above a base so that a log scale
// can start them at zero height.
func panel(results []result, systems []string, title, ylabel string, metric func(result) float64) (*plot.Plot, error) {
	lo := math.Inf(1)
	for _, r := range results {
		if v := metric(r); v > 0 {
			lo = min(lo, v)
		}
	}
	base := math.Floor(math.Log10(lo))
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Y.Tick.Marker = decadeTicks{base: base}
	p.Legend.Top = true
	const width = 4 * vg.Millimeter
	top := 0.0
	for g, c := range chartCells {
		vals := make(plotter.Values, len(systems))
		for i, s := range systems {
			if r, ok := find(results, s, c.workload, c.clients); ok && metric(r) > 0 {
				vals[i] = math.Log10(metric(r)) - base
				top = max(top, vals[i])
			}
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil, err
		}
		bars.Color = c.color
		bars.LineStyle.Width = 0
		bars.Offset = vg.Length(g-len(chartCells)/2)*width + width/2
		p.Add(bars)
		p.Legend.Add(fmt.Sprintf("%s, %d clients", c.workload, c.clients), bars)
	}
	p.NominalX(systems...)
	p.X.Tick.Label.Rotation = math.Pi / 6
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YCenter
	p.Y.Min = 0
	p.Y.Max = math.Ceil(top) + 1 // room for the legend
	return p, nil
}

// decadeTicks labels a log10 axis whose 0 is 10^base.
type decadeTicks struct{ base float64 }

// Ticks returns a labelled tick at every decade.
func (d decadeTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for k := math.Ceil(min); k <= max; k++ {
		ts = append(ts, plot.Tick{Value: k, Label: short(math.Pow(10, k+d.base))})
	}
	return ts
}

// short formats a power of ten as 100, 10k or 1M.
func short(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
