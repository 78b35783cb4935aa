import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import type uPlot from "uplot";
import { api, credits, type UsageRow } from "./api.js";

const DAY_MS = 86_400_000;

function dayString(time: number): string {
  return new Date(time).toISOString().slice(0, 10);
}

/** Every day of the window, with zeros where nothing was metered, as uPlot's column arrays. */
function columns(rows: UsageRow[], from: string, to: string): uPlot.AlignedData {
  const byDay = new Map(rows.map((row) => [row.day, row]));
  const days: number[] = [];
  const requests: number[] = [];
  const tokens: number[] = [];
  const spent: number[] = [];
  for (let time = Date.parse(`${from}T00:00:00Z`); time <= Date.parse(`${to}T00:00:00Z`); time += DAY_MS) {
    const row = byDay.get(dayString(time));
    days.push(time / 1000);
    requests.push(row?.requests ?? 0);
    tokens.push(row ? row.inputTokens + row.outputTokens : 0);
    spent.push(row ? row.credits / 1_000_000 : 0);
  }
  return [days, requests, tokens, spent];
}

function Chart({ data }: { data: uPlot.AlignedData }) {
  const holder = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const element = holder.current;
    if (!element) return;
    const width = () => Math.max(280, element.clientWidth);
    let plot: uPlot | undefined;
    let gone = false;
    const resize = () => plot?.setSize({ width: width(), height: 260 });
    // uPlot is most of the bundle and only this tab draws: it loads when the tab opens.
    void import("uplot").then(({ default: UPlot }) => {
      if (gone) return;
      plot = new UPlot(
        {
          width: width(),
          height: 260,
          scales: { x: { time: true }, count: {}, credits: {} },
          series: [
            { label: "Day", value: (_u, value) => (value == null ? "" : dayString(value * 1000)) },
            { label: "Requests", scale: "count", stroke: "#2563eb", width: 2, points: { show: true } },
            { label: "Tokens", scale: "count", stroke: "#16a34a", width: 2 },
            { label: "Credits", scale: "credits", stroke: "#c2410c", width: 2, dash: [6, 4] },
          ],
          axes: [
            {},
            { scale: "count", label: "requests / tokens" },
            { scale: "credits", side: 1, label: "credits", grid: { show: false }, size: 70, values: (_u, ticks) => ticks.map((tick) => String(Number(tick.toPrecision(3)))) },
          ],
        },
        data,
        element,
      );
      window.addEventListener("resize", resize);
    });
    return () => {
      gone = true;
      window.removeEventListener("resize", resize);
      plot?.destroy();
    };
  }, [data]);
  return <div ref={holder} class="chart" role="img" aria-label="Requests, tokens and credits per day" />;
}

export function UsagePanel({ tenantId, refresh }: { tenantId: string; refresh: number }) {
  const today = new Date().toISOString().slice(0, 10);
  const [from, setFrom] = useState(dayString(Date.now() - 13 * DAY_MS));
  const [to, setTo] = useState(today);
  const [daily, setDaily] = useState<UsageRow[] | undefined>();
  const [models, setModels] = useState<UsageRow[]>([]);
  const [error, setError] = useState("");
  const [tick, setTick] = useState(0);

  useEffect(() => {
    let live = true;
    const query = { tenantId, from, to };
    Promise.all([api<{ rows: UsageRow[] }>("GET", "/usage/daily", { query }), api<{ rows: UsageRow[] }>("GET", "/usage/models", { query })])
      .then(([days, byModel]) => {
        if (!live) return;
        setDaily(days.rows);
        setModels(byModel.rows);
        setError("");
      })
      .catch((caught: Error) => live && setError(caught.message));
    return () => {
      live = false;
    };
  }, [tenantId, from, to, refresh, tick]);

  const totals = (daily ?? []).reduce(
    (sum, row) => ({ requests: sum.requests + row.requests, tokens: sum.tokens + row.inputTokens + row.outputTokens, credits: sum.credits + row.credits }),
    { requests: 0, tokens: 0, credits: 0 },
  );
  const data = useMemo(() => (daily ? columns(daily, from, to) : undefined), [daily]);
  const most = Math.max(1, ...models.map((row) => row.requests));
  return (
    <section aria-labelledby="usage-title">
      <h2 id="usage-title">Usage</h2>
      <form class="row" onSubmit={(event) => event.preventDefault()}>
        <label for="usage-from">From</label>
        <input id="usage-from" type="date" value={from} max={to} onInput={(event) => event.currentTarget.value && setFrom(event.currentTarget.value)} />
        <label for="usage-to">To</label>
        <input id="usage-to" type="date" value={to} min={from} onInput={(event) => event.currentTarget.value && setTo(event.currentTarget.value)} />
        <button type="button" class="secondary" onClick={() => setTick(tick + 1)}>
          Refresh
        </button>
      </form>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <dl class="totals" id="usage-totals" data-requests={daily ? totals.requests : undefined} aria-busy={daily ? undefined : "true"}>
        <div>
          <dt>Requests</dt>
          <dd id="total-requests">{totals.requests.toLocaleString("en")}</dd>
        </div>
        <div>
          <dt>Tokens</dt>
          <dd id="total-tokens">{totals.tokens.toLocaleString("en")}</dd>
        </div>
        <div>
          <dt>Credits spent</dt>
          <dd id="total-credits">{credits(totals.credits)}</dd>
        </div>
      </dl>
      {data && <Chart data={data} />}
      <h3>By model</h3>
      {models.length === 0 ? (
        <p class="muted">No traffic in this window.</p>
      ) : (
        <div class="scroll">
          <table aria-label="Usage by model" id="model-table">
            <thead>
              <tr>
                <th scope="col">Model</th>
                <th scope="col">Requests</th>
                <th scope="col">Input tokens</th>
                <th scope="col">Output tokens</th>
                <th scope="col">Credits</th>
              </tr>
            </thead>
            <tbody>
              {models.map((row) => (
                <tr key={row.model}>
                  <th scope="row">{row.model}</th>
                  <td>
                    <span class="bar" style={{ width: `${Math.round((row.requests / most) * 100)}%` }} aria-hidden="true" />
                    {row.requests.toLocaleString("en")}
                  </td>
                  <td>{row.inputTokens.toLocaleString("en")}</td>
                  <td>{row.outputTokens.toLocaleString("en")}</td>
                  <td>{credits(row.credits)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
