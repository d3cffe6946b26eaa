package report

import (
	"bufio"
	"fmt"
	"html"
	"io"
)

// SVGOptions tune WriteSVG.
type SVGOptions struct {
	// Title names the picture for screen readers and viewers.
	Title string
	// Link, if set, returns the address a node links to ("" for none).
	Link func(Node) string
}

// svgStyle is embedded in every picture so that a file written by the CLI
// looks like the dashboard's. Classes are prefixed (dg-) because an SVG
// inlined in a page shares the page's style sheet. States differ by more
// than colour: dashed borders, markers in the labels and the legend.
const svgStyle = `
.dg-node rect{fill:#fff;stroke:#334;stroke-width:1.2}
.dg-node text{font:12px "DejaVu Sans Mono",monospace;fill:#112}
.dg-node.dg-external rect{fill:#f3f3f3;stroke:#667;stroke-dasharray:4 3}
.dg-node.dg-external text{font-style:italic;fill:#445}
.dg-node.dg-cycle rect{fill:#fff0f0;stroke:#b00;stroke-width:2;stroke-dasharray:6 2}
.dg-node.dg-focus rect{fill:#fff8d8;stroke:#000;stroke-width:3}
.dg-node a:focus rect,.dg-node a:hover rect{stroke:#05c;stroke-width:3}
.dg-edge{fill:none;stroke:#556;stroke-width:1.1;marker-end:url(#dg-arrow)}
.dg-edge.dg-external{stroke:#999;stroke-dasharray:4 3}
.dg-edge.dg-cycle{stroke:#b00;stroke-width:2;stroke-dasharray:6 2}
.dg-edge.dg-pinned{stroke:#a60;stroke-width:2.4;stroke-dasharray:1 3;stroke-linecap:round}
.dg-legend{font:12px "DejaVu Sans",sans-serif;fill:#333}
`

// WriteSVG draws a Picture as a standalone SVG document, also fit to be
// inlined in HTML. Every node carries data-project (or data-image) and a
// <title>, so tests and assistive technology can find it by name.
func WriteSVG(w io.Writer, pic Picture, opts SVGOptions) error {
	bw := bufio.NewWriter(w)
	esc := html.EscapeString
	title := opts.Title
	if title == "" {
		title = "dependency graph"
	}
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" class="dg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-labelledby="dg-title dg-desc">`+"\n",
		pic.Width, pic.Height, pic.Width, pic.Height)
	fmt.Fprintf(bw, `<title id="dg-title">%s</title>`+"\n", esc(title))
	fmt.Fprintf(bw, `<desc id="dg-desc">%d projects in %d columns, left to right in build order; arrows point from an image to the images built from it.</desc>`+"\n",
		pic.Projects, pic.Layers)
	fmt.Fprintf(bw, "<defs><style>%s</style>", svgStyle)
	bw.WriteString(`<marker id="dg-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#556"/></marker></defs>` + "\n")
	bw.WriteString(`<g class="dg-edges">` + "\n")
	for _, e := range pic.Edges {
		from, to := pic.Nodes[e.From], pic.Nodes[e.To]
		class := "dg-edge"
		switch {
		case e.Cycle:
			class += " dg-cycle"
		case e.External:
			class += " dg-external"
		case e.Pinned:
			class += " dg-pinned"
		}
		note := cycleNote(e)
		if e.Pinned && !e.Cycle {
			note = " (pinned by digest: moved by a merge request)"
		}
		fmt.Fprintf(bw, `<path class="%s" d="%s"><title>%s → %s%s</title></path>`+"\n",
			class, edgePath(from, to), esc(from.Name), esc(to.Name), note)
	}
	bw.WriteString("</g>\n" + `<g class="dg-nodes">` + "\n")
	for _, nd := range pic.Nodes {
		class, attr := "dg-node", "data-project"
		if nd.External {
			class, attr = class+" dg-external", "data-image"
		}
		if nd.Cycle {
			class += " dg-cycle"
		}
		if nd.Focus {
			class += " dg-focus"
		}
		fmt.Fprintf(bw, `<g class="%s" %s="%s">`, class, attr, esc(nd.Name))
		link := ""
		if opts.Link != nil {
			link = opts.Link(nd)
		}
		if link != "" {
			fmt.Fprintf(bw, `<a href="%s">`, esc(link))
		}
		fmt.Fprintf(bw, `<title>%s</title><rect x="%d" y="%d" width="%d" height="%d" rx="4"/><text x="%d" y="%d">%s</text>`,
			esc(nodeTitle(nd)), nd.X, nd.Y, nd.W, nd.H, nd.X+padX, nd.Y+nd.H/2+4, esc(label(nd)))
		if link != "" {
			bw.WriteString("</a>")
		}
		bw.WriteString("</g>\n")
	}
	bw.WriteString("</g>\n")
	fmt.Fprintf(bw, `<text class="dg-legend" x="%d" y="%d">→ built after · dotted orange: pinned by digest · dashed grey: external image · ↻ red dashed: on a cycle (never followed) · ★ focus</text>`+"\n",
		margin, pic.Height-10)
	bw.WriteString("</svg>\n")
	return bw.Flush()
}

// edgePath is a curve from the right side of from to the left side of to.
// An edge that does not go rightwards can only close a cycle: within a
// column it bulges out on the right, backwards it loops below.
func edgePath(from, to Node) string {
	x1, y1 := from.X+from.W, from.Y+from.H/2
	x2, y2 := to.X, to.Y+to.H/2
	switch {
	case x2 > x1:
		mid := (x1 + x2) / 2
		return fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", x1, y1, mid, y1, mid, y2, x2, y2)
	case from.X == to.X:
		x2 = to.X + to.W
		bulge := max(x1, x2) + 24 + abs(y2-y1)/4
		return fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", x1, y1, bulge, y1, bulge, y2, x2, y2)
	}
	x1, y1 = from.X+from.W/2, from.Y+from.H
	x2, y2 = to.X+to.W/2, to.Y+to.H
	drop := max(y1, y2) + 30
	return fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", x1, y1, x1, drop, x2, drop, x2, y2)
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func cycleNote(e Edge) string {
	if e.Cycle {
		return " (cycle: never followed)"
	}
	return ""
}

func nodeTitle(nd Node) string {
	switch {
	case nd.External:
		return nd.Name + ": external image"
	case nd.Cycle:
		return nd.Name + ": on a dependency cycle, never rebuilt by a chain"
	}
	return nd.Name
}
