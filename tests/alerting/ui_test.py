#!/usr/bin/env python3
"""/episodes in headless Chromium, plus the JSON API it is built from.

The throttle simulator throttles /workload.slice/proxy.service; once the
agent has an open episode we (1) check /api/v1/cgroups and /api/v1/episodes,
(2) dump the page's DOM with Chromium and look for the throttled cgroup's
row, (3) take a 1280x900 screenshot and check the PNG header.
Set SOCKPRESSURE_SCREENSHOT=FILE to keep the screenshot.
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

CGROUP = "/workload.slice/proxy.service"
CHROMIUM = "/usr/bin/chromium"


def chromium(procs, *args):
    profile = os.path.join(procs.tmp, f"chromium-profile-{len(os.listdir(procs.tmp))}")
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
            f"--user-data-dir={profile}", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=90)


def main():
    args = harness.parse_args()
    harness.need(CHROMIUM, args.agent)
    procs = harness.Procs()
    ok = False
    try:
        root = os.path.join(procs.tmp, "tree")
        harness.start_sim(procs, args.sim, root, state="throttling")
        # MGLRU on (6.12's default), so the node precondition shows in the API and on the page.
        os.makedirs(os.path.join(root, "sysfs", "kernel", "mm", "lru_gen"), exist_ok=True)
        with open(os.path.join(root, "sysfs", "kernel", "mm", "lru_gen", "enabled"), "w") as f:
            f.write("0x0007\n")
        port = harness.free_port()
        procs.start("agent", harness.agent_argv(args.agent, root, port, "--episodes.quiet-period=30s"))
        base = f"http://127.0.0.1:{port}"

        def open_episode():
            eps = json.loads(harness.http_get(f"{base}/api/v1/episodes"))
            return [e for e in eps.get("episodes", []) if e["cgroup"] == CGROUP and e["active"]]
        ep = harness.wait_for(open_episode, 30, "open episode on the throttled cgroup")[0]
        harness.wait_for(lambda: float(json.loads(harness.http_get(f"{base}/api/v1/episodes"))["episodes"][0]
                                       ["throttledSeconds"]) >= 2, 30, "episode to run for 2s")

        # JSON API: protobuf JSON mapping (camelCase, uint64 as strings).
        eps = json.loads(harness.http_get(f"{base}/api/v1/episodes?cgroup={CGROUP}&limit=1"))
        e = eps["episodes"][0]
        assert e["trigger"] == "socket_pressure", e
        assert e["preconditions"]["swapEnabled"] is True and e["preconditions"]["socketAccountingEnabled"] is True, e
        assert e["preconditions"]["signalSources"]["socket_pressure"] == "memory_stat", e
        assert e["preconditions"]["mglruEnabled"] is True, e
        assert e["peakScanWithoutReclaimRatio"] > 0.99, e
        assert e["topReclaimers"][0]["cgroup"] == "/workload.slice/cache.service", e["topReclaimers"]
        cg = json.loads(harness.http_get(f"{base}/api/v1/cgroups?pressure=1"))
        rows = {c["cgroup"]: c for c in cg["cgroups"]}
        assert rows[CGROUP]["pressureAsserted"] is True and rows[CGROUP]["activeEpisodeId"] == ep["id"], rows
        allcg = json.loads(harness.http_get(f"{base}/api/v1/cgroups"))
        assert len(allcg["cgroups"]) > len(cg["cgroups"]), "?pressure=1 should filter"
        metrics = harness.http_get(f"{base}/metrics")
        assert f'sockpressure_episode_active{{cgroup="{CGROUP}"}} 1' in metrics
        assert f'sockpressure_episodes_total{{cgroup="{CGROUP}"}} 1' in metrics

        # The page, rendered by a real browser. The simulator keeps the cgroup under pressure only
        # while it gets the CPU to move the counters every 0.25 s; on a loaded machine it can stall
        # past the kernel's 1 s window, and the page then rightly shows the open episode as quiet.
        # So a page that shows the row as quiet is fetched again (bounded) when the agent's API says
        # the pressure is back; the page must show it throttled then.
        row = f'<tr class="throttled" data-cgroup="{CGROUP}">'
        quiet = f'<tr class="active" data-cgroup="{CGROUP}">'
        for attempt in range(5):
            dom = chromium(procs, "--dump-dom", f"{base}/episodes")
            assert dom.returncode == 0, dom.stderr[-2000:]
            html = dom.stdout
            if row in html:
                break
            assert quiet in html and "quiet, episode open" in html, html[:3000]
            print(f"page {attempt + 1}: the open episode was quiet (simulator stalled); waiting for pressure")
            harness.wait_for(lambda: any(c["cgroup"] == CGROUP and c.get("pressureAsserted") for c in json.loads(
                harness.http_get(f"{base}/api/v1/cgroups?pressure=1"))["cgroups"]),
                30, "pressure on the throttled cgroup again")
        assert row in html, html[:3000]
        assert f'id="episode-{ep["id"]}"' in html
        assert "throttled (own pressure)" in html
        assert 'MGLRU <span class="ok">on</span>' in html  # node precondition pill
        assert "on / on / on" in html  # episode: swap / sock acct / MGLRU
        assert "/workload.slice/cache.service" in html  # top reclaimer column

        # The episode's timeline: an inline SVG in its row, drawn by the browser. Chromium's own
        # layout of it (through a page that measures the SVG's elements) must give the pressure
        # bars a real size, so a malformed or empty drawing fails here.
        m = re.search(r'<tr id="episode-%s".*?(<svg class="timeline".*?</svg>)' % ep["id"], html, re.S)
        assert m, "no <svg class=\"timeline\"> in the episode's row"
        svg = m.group(1)
        assert 'class="pressure"' in svg and "<title>" in svg, svg[:500]
        probe = os.path.join(procs.tmp, "timeline-probe.html")
        with open(probe, "w") as f:
            f.write("<!doctype html><html><body>" + svg + "<pre id=out></pre><script>"
                    "const s=document.querySelector('svg.timeline'),r=s.getBoundingClientRect();"
                    "const bars=[...s.querySelectorAll('rect.pressure')].map(b=>b.getBBox());"
                    "document.getElementById('out').textContent=JSON.stringify({w:r.width,h:r.height,"
                    "bars:bars.length,area:bars.reduce((a,b)=>a+b.width*b.height,0),"
                    "ns:s.namespaceURI})</script></body></html>")
        laid = chromium(procs, "--dump-dom", "file://" + probe)
        mm = re.search(r'<pre id="out">(.*?)</pre>', laid.stdout, re.S)
        assert mm, laid.stdout[-2000:] + laid.stderr[-2000:]
        got = json.loads(mm.group(1))
        print(f"timeline in Chromium: {got}")
        assert got["ns"] == "http://www.w3.org/2000/svg" and got["w"] == 240 and got["h"] == 40, got
        assert got["bars"] >= 1 and got["area"] > 0, got

        png = os.path.join(procs.tmp, "episodes.png")
        shot = chromium(procs, f"--screenshot={png}", "--window-size=1280,900", f"{base}/episodes")
        assert os.path.exists(png), shot.stderr[-2000:]
        with open(png, "rb") as f:
            head = f.read(24)
        assert head[:8] == b"\x89PNG\r\n\x1a\n", head
        width, height = struct.unpack(">II", head[16:24])
        assert (width, height) == (1280, 900), (width, height)
        size = os.path.getsize(png)
        assert size > 20000, f"screenshot suspiciously small ({size} bytes): blank page?"
        keep = os.environ.get("SOCKPRESSURE_SCREENSHOT")
        if keep:
            shutil.copy(png, keep)
        print(f"screenshot {width}x{height}, {size} bytes; DOM has the throttled row and episode #{ep['id']}")
        ok = True
        print("PASS")
        return 0
    except AssertionError as e:
        print(f"FAIL: {e}")
        print("--- agent log (tail) ---\n" + "\n".join(procs.log("agent").splitlines()[-30:]))
        return 1
    finally:
        procs.close(keep=not ok)


if __name__ == "__main__":
    sys.exit(main())
