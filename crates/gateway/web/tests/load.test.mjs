// The load benchmark: Iris Web opened on a phone profile (the DevTools protocol's throttling:
// 150 ms round trip, 12.8 Mbit/s down and up, CPU 4× slower), cold (a new browser profile) and
// warm (the same profile again), against the real gateway with a chat of 50 messages. It reports
// first contentful paint, the time until the chat's last 50 messages are drawn, and the requests
// and bytes of each load (printed, and written to artifacts/load.json; BENCHMARKS.md keeps the
// figures beside the targets). Timings depend on the machine, so it asserts only what a person
// notices: the page paints, and all 50 messages are drawn, with no error.

import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { ARTIFACTS, PHONE, TOKEN, browserSuite, openSignedIn, pageErrors, send } from './harness.mjs';

const suite = browserSuite(before, after);
const RUNS = Number(process.env.IRIS_LOAD_RUNS || 3);
const MESSAGES = 50;

/** What the page records about its own load, installed before any of its scripts runs. */
function recordLoad(count) {
  window.__load = { drawn: null };
  const check = () => {
    if (window.__load.drawn === null && document.querySelectorAll('#log .msg').length >= count) {
      window.__load.drawn = performance.now();
    }
  };
  new MutationObserver(check).observe(document, { childList: true, subtree: true });
}

/** Throttles the page like a mid-range phone on a good mobile network; counts its requests. */
async function throttle(page) {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.emulateNetworkConditions', {
    offline: false, latency: 150, downloadThroughput: 12.8e6 / 8, uploadThroughput: 12.8e6 / 8,
  });
  await cdp.send('Emulation.setCPUThrottlingRate', { rate: 4 });
  const traffic = { requests: 0, network: 0, bytes: 0 };
  const http = new Set();
  cdp.on('Network.requestWillBeSent', (e) => {
    if (!/^https?:/.test(e.request.url)) return;
    http.add(e.requestId);
    traffic.requests += 1;
  });
  cdp.on('Network.responseReceived', (e) => {
    const r = e.response;
    if (http.has(e.requestId) && (r.fromDiskCache || r.fromMemoryCache || r.fromServiceWorker || r.fromPrefetchCache)) http.delete(e.requestId);
  });
  cdp.on('Network.requestServedFromCache', (e) => http.delete(e.requestId));
  cdp.on('Network.loadingFinished', (e) => {
    if (!http.has(e.requestId)) return;
    traffic.network += 1;
    traffic.bytes += e.encodedDataLength;
  });
  return () => ({ ...traffic });
}

/** One load of `url`; resolves when the last 50 messages are drawn. */
async function measure(page, url) {
  const traffic = await throttle(page);
  await page.goto(url);
  await page.waitForFunction(() => window.__load.drawn !== null, null, { timeout: 120000 }).catch(async (err) => {
    const seen = await page.evaluate(() => ({ conn: document.body.dataset.conn, drawn: document.querySelectorAll('#log .msg').length }));
    throw new Error(`${err.message}: ${JSON.stringify(seen)}`);
  });
  const times = await page.evaluate(() => ({
    fcp: performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? null,
    drawn: window.__load.drawn,
  }));
  assert.ok(times.fcp !== null, 'the page painted');
  return { ...times, ...traffic() };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

describe('Load on a phone profile (benchmark)', { timeout: 600000 }, () => {
  test(`first paint and the last ${MESSAGES} messages, cold and warm (${RUNS} runs each)`, { timeout: 600000 }, async () => {
    const gw = await suite.gateway({ agent: 'none', config: '[limits]\nsends_per_minute = 6000\n' });
    const seeder = await suite.device(PHONE);
    await openSignedIn(seeder.page, gw.url);
    for (let i = 1; i <= MESSAGES; i++) {
      await send(seeder.page, `message number ${i} of the benchmark chat`);
      await seeder.page.locator('.msg.role-user').nth(i - 1).waitFor();
    }
    await seeder.context.close();

    const runs = { cold: [], warm: [] };
    for (let i = 0; i < RUNS; i++) {
      const { context, page } = await suite.device(PHONE);
      await page.addInitScript(recordLoad, MESSAGES);
      // Cold: a new profile (empty caches, no service worker), signed in through the link.
      runs.cold.push(await measure(page, `${gw.url}#token=${encodeURIComponent(TOKEN)}`));
      // Where the page installs a service worker, the warm load starts once it is active.
      await page.evaluate(async () => {
        const reg = await navigator.serviceWorker?.getRegistration();
        if (reg) await navigator.serviceWorker.ready;
      });
      assert.deepEqual(pageErrors(page), []);
      // Warm: the same profile opens the page again, as a person coming back to it.
      const again = await context.newPage();
      await page.close();
      again.errors = [];
      again.on('pageerror', (e) => again.errors.push(String(e)));
      await again.addInitScript(recordLoad, MESSAGES);
      runs.warm.push(await measure(again, gw.url));
      assert.equal(await again.locator('#log .msg').count() >= MESSAGES, true, 'every message is drawn');
      assert.deepEqual(pageErrors(again), []);
      await context.close();
    }

    const summary = {};
    for (const [kind, list] of Object.entries(runs)) {
      summary[kind] = {
        fcp_ms: Math.round(median(list.map((r) => r.fcp))),
        drawn_ms: Math.round(median(list.map((r) => r.drawn))),
        requests: median(list.map((r) => r.requests)),
        network_requests: median(list.map((r) => r.network)),
        kilobytes: Math.round(median(list.map((r) => r.bytes)) / 1024),
        runs: list.map((r) => ({ fcp_ms: Math.round(r.fcp), drawn_ms: Math.round(r.drawn) })),
      };
    }
    mkdirSync(ARTIFACTS, { recursive: true });
    writeFileSync(path.join(ARTIFACTS, 'load.json'), `${JSON.stringify(summary, null, 2)}\n`);
    console.log(`load benchmark (median of ${RUNS}): ${JSON.stringify(summary)}`);
  });
});
