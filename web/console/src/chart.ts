// Line charts in SVG: a sparkline for the list, a titled chart of one or more series for a
// sandbox. Points are set as attributes (no style attributes: the page's CSP allows none).

const svgNS = "http://www.w3.org/2000/svg";

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number> = {}): SVGElementTagNameMap[K] {
  const el = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

/** A series: its values (oldest first) and the class that colours it. */
export interface Series {
  values: number[];
  cls: string;
  label?: string;
}

/** points turns values into an SVG polyline's points within w×h, scaled to max. */
export function points(values: number[], w: number, h: number, max: number, slots = values.length): string {
  if (values.length === 0) return "";
  const step = slots > 1 ? w / (slots - 1) : 0;
  const off = slots - values.length;
  return values
    .map((v, i) => {
      const x = (off + i) * step;
      const y = h - (max > 0 ? Math.min(1, Math.max(0, v / max)) : 0) * (h - 2) - 1;
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    })
    .join(" ");
}

/** Chart draws series as lines in a fixed box; set() redraws them. */
export class Chart {
  readonly el: SVGSVGElement;
  readonly #w: number;
  readonly #h: number;
  readonly #slots: number;
  readonly #lines: SVGPolylineElement[] = [];
  readonly #maxLabel?: SVGTextElement;

  /** slots is how many samples span the width (older ones scroll off). */
  constructor(opts: { width: number; height: number; slots: number; series: string[]; axis?: boolean; title?: string; wide?: boolean }) {
    this.#w = opts.width;
    this.#h = opts.height;
    this.#slots = opts.slots;
    this.el = svg("svg", { viewBox: `0 0 ${opts.width} ${opts.height}`, width: opts.width, height: opts.height, class: opts.wide ? "chart wide" : "chart", role: "img" });
    // A wide chart stretches to its box's width (its lines keep their width).
    if (opts.wide) this.el.setAttribute("preserveAspectRatio", "none");
    if (opts.title) this.el.setAttribute("aria-label", opts.title);
    this.el.append(svg("rect", { x: 0, y: 0, width: opts.width, height: opts.height, class: "chart-bg" }));
    if (opts.axis) {
      for (const f of [0.25, 0.5, 0.75]) this.el.append(svg("line", { x1: 0, x2: opts.width, y1: opts.height * f, y2: opts.height * f, class: "chart-grid" }));
      this.#maxLabel = svg("text", { x: 4, y: 12, class: "chart-label" });
      this.el.append(this.#maxLabel);
    }
    for (const cls of opts.series) {
      const line = svg("polyline", { class: `chart-line ${cls}`, points: "", fill: "none", "vector-effect": "non-scaling-stroke" });
      this.#lines.push(line);
      this.el.append(line);
    }
  }

  /**
   * set draws each series' last values against max (the largest value when 0), over the chart's
   * slots or fewer (a short history then spans the width).
   */
  set(series: number[][], max = 0, maxLabel = "", slots = this.#slots): void {
    const n = Math.min(slots, this.#slots);
    const tail = series.map((v) => v.slice(-n));
    const top = max > 0 ? max : Math.max(1e-9, ...tail.flat());
    tail.forEach((v, i) => this.#lines[i]?.setAttribute("points", points(v, this.#w, this.#h, top, n)));
    this.el.dataset.samples = String(Math.max(0, ...tail.map((v) => v.length)));
    if (this.#maxLabel) this.#maxLabel.textContent = maxLabel;
  }
}
