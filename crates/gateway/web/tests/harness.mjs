// Test harness: the real gateway binary as a child process, Debian's Chromium driven by
// playwright-core (never a downloaded browser), a TCP proxy that can cut a page's network, and
// small helpers (screenshots, a generated PNG).

import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
export const TOKEN = 'web-test-token-0123456789';
export const ARTIFACTS = path.join(here, 'artifacts');
export const PHONE = { width: 390, height: 844 };
export const DESKTOP = { width: 1280, height: 800 };

/** The gateway binary: `IRIS_GATEWAY_BIN`, else the workspace's debug build. */
export function gatewayBin() {
  return process.env.IRIS_GATEWAY_BIN || path.resolve(here, '../../../../target/debug/iris-gateway');
}

/** Chromium from the system (Debian's `chromium` package). */
export function chromiumPath() {
  return process.env.IRIS_CHROMIUM || '/usr/bin/chromium';
}

/**
 * A gateway process on 127.0.0.1. `port` 0 picks a free one; `restart()` starts it again on the
 * same port and data dir, as a restarted service would be.
 */
export class Gateway {
  constructor({ agent = 'demo', config = null } = {}) {
    this.dir = mkdtempSync(path.join(tmpdir(), 'iris-web-'));
    this.agent = agent;
    this.configPath = null;
    if (config) {
      this.configPath = path.join(this.dir, 'config.toml');
      writeFileSync(this.configPath, config);
    }
    this.port = 0;
    this.proc = null;
    this.stderr = '';
  }

  async start() {
    const args = ['serve', '--listen', `127.0.0.1:${this.port}`, '--data-dir', path.join(this.dir, 'data'), '--token', TOKEN, '--agent', this.agent];
    if (this.configPath) args.push('--config', this.configPath);
    const proc = spawn(gatewayBin(), args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, IRIS_LOG: process.env.IRIS_LOG || 'warn' } });
    this.proc = proc;
    proc.stderr.on('data', (d) => { this.stderr = (this.stderr + d).slice(-20000); });
    const url = await new Promise((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`gateway did not start: ${this.stderr}`)), 20000);
      proc.stdout.on('data', (d) => {
        out += d;
        const m = /Web:\s+(http:\/\/\S+)/.exec(out);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]);
        }
      });
      proc.on('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`gateway exited with ${code}: ${this.stderr}`));
      });
    });
    this.url = url;
    this.port = Number(new URL(url).port);
    return this;
  }

  /** SIGTERM and wait for the exit (a graceful shutdown: `status restarting` first). */
  async stop() {
    if (!this.proc || this.proc.exitCode !== null) return;
    const exited = new Promise((r) => this.proc.once('exit', r));
    this.proc.kill('SIGTERM');
    await exited;
  }

  /** SIGKILL and wait for the exit: the process dies at once, as in a power cut or an OOM kill. */
  async kill() {
    if (!this.proc || this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const exited = new Promise((r) => this.proc.once('exit', r));
    this.proc.kill('SIGKILL');
    await exited;
  }

  async restart() {
    await this.stop();
    await this.start();
  }

  async dispose() {
    if (this.proc && this.proc.exitCode === null) {
      const exited = new Promise((r) => this.proc.once('exit', r));
      this.proc.kill('SIGKILL');
      await exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Launches headless Chromium with a fresh profile (playwright creates a new user-data-dir). */
export async function launchBrowser() {
  return chromium.launch({
    executablePath: chromiumPath(),
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    timeout: 30000,
  });
}

/** A new browser context (a separate device: its own storage, so its own device_id). */
export async function newDevice(browser, viewport = DESKTOP) {
  const context = await browser.newContext({ viewport, deviceScaleFactor: 1, hasTouch: viewport.width < 500, isMobile: false });
  const page = await context.newPage();
  page.setDefaultTimeout(15000);
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.errors = errors;
  return { context, page };
}

/** Opens the client signed in through the URL fragment, and waits until it is online. */
export async function openSignedIn(page, baseUrl) {
  await page.goto(`${baseUrl}#token=${encodeURIComponent(TOKEN)}`);
  await waitOnline(page);
}

export async function waitOnline(page) {
  await page.waitForFunction(() => document.body.dataset.conn === 'online', null, { timeout: 20000 });
}

/** Saves a screenshot under artifacts/. */
export async function shot(page, name) {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), animations: 'disabled' });
}

/** Types a message into the composer and sends it with Enter. */
export async function send(page, text) {
  const box = page.getByRole('textbox', { name: 'Message' });
  await box.fill(text);
  await box.press('Enter');
}

/**
 * Makes a chat with the chat list's "+" (one tap: it is shown at once, as "New chat") and, with
 * `name`, renames it from its row's menu; resolves once the chat is shown under its name. On a
 * phone the chat list is opened for it and closed again.
 */
export async function newChat(page, name = null) {
  const open = page.getByRole('button', { name: 'Open the chat list' });
  if (await open.isVisible()) await open.click();
  await page.getByRole('button', { name: 'New chat' }).click();
  await page.locator('#lane-title', { hasText: 'New chat' }).waitFor();
  if (!name) return;
  if (await open.isVisible()) await open.click();
  const row = page.locator('.chan-row', { has: page.locator('.chan[aria-current="page"]') });
  await row.locator('.chan-more').click();
  await page.getByRole('menuitem', { name: 'Rename' }).click();
  const ask = page.locator('dialog#ask[open]');
  await ask.getByRole('textbox', { name: 'Name' }).fill(name);
  await ask.getByRole('button', { name: 'OK' }).click();
  await page.locator('#lane-title', { hasText: name }).waitFor();
  if (await page.locator('body.sidebar-open').count()) {
    await page.keyboard.press('Escape');
    await page.locator('body.sidebar-open').waitFor({ state: 'detached' });
  }
}

/**
 * A TCP proxy in front of the gateway. `cut()` drops every connection through it and refuses
 * new ones (the network is gone); `restore()` lets connections through again.
 */
export class Proxy {
  constructor(targetPort) {
    this.targetPort = targetPort;
    this.sockets = new Set();
    this.down = false;
    this.server = net.createServer((client) => {
      if (this.down) {
        client.destroy();
        return;
      }
      const upstream = net.connect(this.targetPort, '127.0.0.1');
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => {});
      }
      client.pipe(upstream);
      upstream.pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
  }

  async listen() {
    await new Promise((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${this.server.address().port}/`;
    return this;
  }

  cut() {
    this.down = true;
    for (const s of this.sockets) s.destroy();
  }

  restore() {
    this.down = false;
  }

  async close() {
    this.cut();
    await new Promise((r) => this.server.close(r));
  }
}

/** An uncompressed-ish RGB PNG of `w`×`h` noise: big enough for a visible upload progress. */
export function noisePng(w, h) {
  const raw = Buffer.alloc((w * 3 + 1) * h);
  let seed = 12345;
  for (let y = 0; y < h; y++) {
    raw[y * (w * 3 + 1)] = 0;
    for (let x = 0; x < w * 3; x++) {
      seed = (seed * 1103515245 + 12345) >>> 0;
      raw[y * (w * 3 + 1) + 1 + x] = x % 3 === 2 ? 200 : (seed >>> 16) & 0xff;
    }
  }
  const chunk = (type, data) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const td = Buffer.concat([Buffer.from(type), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(zlib.crc32(td));
    return Buffer.concat([len, td, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr[8] = 8;
  ihdr[9] = 2;
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', zlib.deflateSync(raw, { level: 1 })),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/**
 * Per-file setup of a browser suite: one Chromium for the file, and `gateway()`/`device()` that
 * start a gateway or open a device (a browser context) cleaned up after the file. Pass the
 * file's `before` and `after` from node:test.
 */
export function browserSuite(before, after) {
  const suite = { browser: null, cleanups: [] };
  before(async () => {
    suite.browser = await launchBrowser();
  });
  after(async () => {
    for (const fn of suite.cleanups.reverse()) await fn().catch(() => {});
    if (suite.browser) await suite.browser.close();
  });
  suite.gateway = async (opts) => {
    const gw = await new Gateway(opts).start();
    suite.cleanups.push(() => gw.dispose());
    return gw;
  };
  suite.device = async (viewport = DESKTOP) => {
    const d = await newDevice(suite.browser, viewport);
    suite.cleanups.push(() => d.context.close());
    return d;
  };
  return suite;
}

/** Page errors, without the browser's own reports of refused connections (expected offline). */
export function pageErrors(page) {
  return page.errors.filter((e) => !/WebSocket connection|ERR_CONNECTION|Failed to load resource/.test(e));
}
