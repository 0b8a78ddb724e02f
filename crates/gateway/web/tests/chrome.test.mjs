// The page around the transcript, at phone and desktop size, through the real gateway and its
// demo agent: the phone layout, the busy bar's words, the `/` list following the agent, read
// ticks across devices, the keyboard, an axe-core accessibility check, the sign-in error, and
// choosing a chat's agent when the gateway has several. With IRIS_SCREENSHOTS=1 it also writes the
// README's screenshots into docs/screenshots/.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';

import {
  DESKTOP, PHONE, browserSuite, gatewayBin, newChat, openSignedIn, pageErrors, send, waitOnline,
} from './harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const suite = browserSuite(before, after);
const gateway = suite.gateway;
const device = suite.device;

async function signedIn(viewport, opts) {
  const gw = await gateway(opts);
  const d = await device(viewport);
  await openSignedIn(d.page, gw.url);
  return { gw, ...d };
}

const assistant = (page, text) => page.locator('.msg.role-assistant:not(.streaming)', { hasText: text });
const userMsg = (page, text) => page.locator('.msg.role-user', { hasText: text });
const busyText = (page) => page.locator('#busy-text').textContent();

/** Waits until the busy bar is shown with text matching `re`. */
async function busySays(page, re) {
  await page.waitForFunction((src) => {
    const bar = document.getElementById('busy');
    return !bar.hidden && new RegExp(src).test(document.getElementById('busy-text').textContent);
  }, re.source);
}

/** Serious and critical axe-core violations on the page as it is now, and those of `rules` at any impact. */
async function axeViolations(page, rules = []) {
  await page.evaluate(AXE);
  const result = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
  return result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical' || rules.includes(v.id))
    .map((v) => `${v.id}: ${v.help} — ${v.nodes.slice(0, 3).map((n) => `${n.target.join(' ')} ${n.failureSummary}`).join(' | ')}`);
}

/** The focused element's id or accessible label, for asserting where the focus went. */
const focused = (page) => page.evaluate(() => {
  const el = document.activeElement;
  return el ? el.id || el.getAttribute('aria-label') || el.textContent.trim() : null;
});

for (const [name, viewport] of [['phone', PHONE], ['desktop', DESKTOP]]) {
  const phone = viewport === PHONE;

  describe(`Iris Web chrome (${name})`, { timeout: 300000 }, () => {
    test('the message box gets the width, the thread toggle has a label, the footer is one line', { timeout: 60000 }, async () => {
      const { page } = await signedIn(viewport);
      const box = page.getByRole('textbox', { name: 'Message' });
      const width = (await box.boundingBox()).width;
      const main = (await page.locator('#main').boundingBox()).width;
      assert.ok(width >= 0.6 * main, `the message box is ${width}px of ${main}px`);

      const toggle = page.getByRole('button', { name: 'Send as a new thread' });
      if (phone) {
        assert.equal(await toggle.isVisible(), false, 'behind "+" on a phone');
        assert.equal(await page.getByRole('button', { name: 'Attach files' }).isVisible(), false);
        await page.getByRole('button', { name: 'More actions' }).click();
        const item = page.getByRole('menuitemcheckbox', { name: 'Send as a new thread' });
        assert.equal(await item.getAttribute('aria-checked'), 'false');
        await item.click();
      } else {
        await toggle.click();
      }
      assert.equal(await toggle.getAttribute('aria-pressed'), 'true');
      const label = toggle.locator('.toggle-label');
      assert.equal(await label.textContent(), 'New thread');
      assert.ok((await label.boundingBox()).width > 20, 'the label is visible');
      await toggle.click();
      assert.equal(await page.locator('#auto-thread').getAttribute('aria-pressed'), 'false');

      await send(page, 'cost and think please');
      const answer = assistant(page, 'Echo: cost and think please');
      await answer.waitFor();
      const runtime = answer.locator('.runtime');
      const lineHeight = await runtime.evaluate((el) => parseFloat(getComputedStyle(el).fontSize) * 1.6);
      assert.ok((await runtime.boundingBox()).height <= lineHeight, 'the footer is one line');
      const metaHeight = (await answer.locator('.meta').boundingBox()).height;
      assert.ok(metaHeight <= 32, `the meta line is one line (${metaHeight}px)`);
      await runtime.click();
      assert.equal(await runtime.getAttribute('aria-expanded'), 'true');
      assert.equal(await runtime.evaluate((el) => el.scrollWidth <= el.clientWidth + 1), true, 'all of it shows');
      assert.deepEqual(pageErrors(page), []);
    });

    test('the chat list closes after creating or choosing a chat', { timeout: 60000 }, async () => {
      const { page } = await signedIn(viewport);
      const sidebar = page.locator('#sidebar');
      if (phone) await page.getByRole('button', { name: 'Open the chat list' }).click();
      // One tap: the new chat is shown at once, ready to be written in.
      await page.getByRole('button', { name: 'New chat' }).click();
      await page.locator('#lane-title', { hasText: 'New chat' }).waitFor();
      assert.equal(await page.evaluate(() => document.activeElement.id), 'composer-input');
      if (phone) {
        await sidebar.waitFor({ state: 'hidden' });
        await page.getByRole('button', { name: 'Open the chat list' }).click();
        await sidebar.locator('.chan', { hasText: 'Default' }).click();
        await sidebar.waitFor({ state: 'hidden' });
      } else {
        assert.equal(await sidebar.isVisible(), true, 'the sidebar stays on a wide screen');
        await sidebar.locator('.chan', { hasText: 'Default' }).click();
      }
      await page.locator('#lane-title', { hasText: 'Default' }).waitFor();
      assert.deepEqual(pageErrors(page), []);
    });

    test('the busy bar says what the agent is doing', { timeout: 90000 }, async () => {
      const { page } = await signedIn(viewport);
      await send(page, 'hang on');
      await busySays(page, /^Thinking…$/);
      await page.getByRole('button', { name: 'Stop' }).click();
      await page.locator('#busy').waitFor({ state: 'hidden' });

      await send(page, 'slow story');
      // While the answer streams the bar says "Writing…", never "Thinking…".
      await page.waitForFunction(() => {
        const open = document.querySelector('.msg.role-assistant.streaming');
        return open && open.dataset.text && document.getElementById('busy-text').textContent === 'Writing…';
      });
      await assistant(page, 'Echo: slow story').waitFor();

      await send(page, 'approve this');
      await page.locator('dialog#picker[open]').waitFor();
      await busySays(page, /^Waiting for you/);
      await page.locator('dialog#picker[open]').getByRole('button', { name: 'Allow once' }).click();
      await assistant(page, 'Permission granted').waitFor();

      await send(page, 'wedge');
      await busySays(page, /^Running terminal…$/);
      await page.getByRole('button', { name: 'Stop' }).click();
      await page.locator('#busy').waitFor({ state: 'hidden' });
      assert.deepEqual(pageErrors(page), []);
    });

    test('the / list follows the agent of the chat while it is open', { timeout: 60000 }, async () => {
      // Two demo agents; only `beta` announces `/betaonly`, when its first session starts (the
      // default agent is started with the gateway). The open list follows both changes.
      const config = `[agents.beta]\ncommand = "${gatewayBin()} demo-agent"\nenv = { DEMO_EXTRA_COMMAND = "betaonly" }\n`;
      const { gw, page } = await signedIn(viewport, { config });
      const other = await device(DESKTOP);
      await openSignedIn(other.page, gw.url);

      const box = page.getByRole('textbox', { name: 'Message' });
      await box.fill('/');
      const drawer = page.getByRole('listbox', { name: 'Slash commands' });
      await drawer.getByRole('option', { name: /^\/tools/ }).waitFor();
      assert.equal(await drawer.getByRole('option', { name: /^\/betaonly/ }).count(), 0, 'the demo agent has no /betaonly');

      // Another device moves the chat to `beta` and talks to it; the list open here gains its command.
      await send(other.page, '/agent beta');
      await other.page.locator('.msg.role-system', { hasText: 'now talks to beta' }).waitFor();
      await send(other.page, 'hello beta');
      await drawer.getByRole('option', { name: /^\/betaonly/ }).waitFor();
      assert.equal(await box.inputValue(), '/');
      // Back on the demo agent, /betaonly is gone.
      await send(other.page, '/agent demo');
      await drawer.getByRole('option', { name: /^\/betaonly/ }).waitFor({ state: 'detached' });
      assert.deepEqual(pageErrors(page), []);
    });

    test('read ticks are the same on every device', { timeout: 60000 }, async () => {
      const { gw, page } = await signedIn(viewport);
      const other = await device(DESKTOP);
      await openSignedIn(other.page, gw.url);
      const ticks = (p, text) => userMsg(p, text).locator('.ticks').getAttribute('aria-label');

      await send(page, 'hello there');
      for (const p of [page, other.page]) await assistant(p, 'Echo: hello there').waitFor();
      assert.deepEqual([await ticks(page, 'hello there'), await ticks(other.page, 'hello there')], ['Read', 'Read']);

      // Taken by the gateway but not answered: one tick everywhere, also on the sender.
      await send(page, 'hang a moment');
      for (const p of [page, other.page]) await busySays(p, /Thinking/);
      assert.deepEqual([await ticks(page, 'hang a moment'), await ticks(other.page, 'hang a moment')], ['Delivered', 'Delivered']);
      await other.page.reload();
      await waitOnline(other.page);
      await userMsg(other.page, 'hang a moment').waitFor();
      assert.equal(await ticks(other.page, 'hello there'), 'Read');
      assert.equal(await ticks(other.page, 'hang a moment'), 'Delivered');
      await page.getByRole('button', { name: 'Stop' }).click();
      assert.deepEqual(pageErrors(page), []);
    });

    test('Esc closes every menu and panel, arrows move through menus, the focus goes back', { timeout: 60000 }, async () => {
      const { page } = await signedIn(viewport);
      const menuButton = page.getByRole('button', { name: 'Menu', exact: true });
      await menuButton.focus();
      await page.keyboard.press('Enter');
      const menu = page.locator('#menu');
      await menu.waitFor();
      assert.equal(await focused(page), 'Commands');
      await page.keyboard.press('ArrowDown');
      assert.notEqual(await focused(page), 'Commands');
      await page.keyboard.press('End');
      assert.equal(await focused(page), 'Sign out');
      await page.keyboard.press('ArrowDown');
      assert.equal(await focused(page), 'Commands', 'the arrows wrap around');
      await page.keyboard.press('Escape');
      await menu.waitFor({ state: 'hidden' });
      assert.equal(await focused(page), 'open-menu');

      if (phone) {
        await page.getByRole('button', { name: 'More actions' }).click();
        await page.getByRole('menuitem', { name: 'Attach files' }).waitFor();
        await page.keyboard.press('ArrowDown');
        assert.equal(await focused(page), 'Send as a new thread');
        await page.keyboard.press('Escape');
        assert.equal(await page.locator('.popup').count(), 0);
        assert.equal(await focused(page), 'composer-more');

        await page.getByRole('button', { name: 'Open the chat list' }).click();
        await page.locator('#sidebar').waitFor();
      }
      const actions = page.getByRole('button', { name: 'Actions for Default' });
      await actions.click();
      await page.getByRole('menuitem', { name: 'Rename' }).waitFor();
      await page.keyboard.press('Escape');
      assert.equal(await page.locator('.popup').count(), 0);
      assert.equal(await focused(page), 'Actions for Default');
      if (phone) {
        await page.keyboard.press('Escape');
        await page.locator('#sidebar').waitFor({ state: 'hidden' });
        assert.equal(await focused(page), 'open-sidebar');
      }

      await page.getByRole('button', { name: 'Search messages' }).click();
      await page.getByRole('searchbox', { name: 'Search messages' }).waitFor();
      await page.keyboard.press('Escape');
      await page.locator('#search').waitFor({ state: 'hidden' });
      assert.equal(await focused(page), 'open-search');

      const box = page.getByRole('textbox', { name: 'Message' });
      await box.fill('/');
      await page.getByRole('listbox', { name: 'Slash commands' }).waitFor();
      await page.keyboard.press('Escape');
      await page.getByRole('listbox', { name: 'Slash commands' }).waitFor({ state: 'hidden' });
      assert.equal(await focused(page), 'composer-input');
      assert.deepEqual(pageErrors(page), []);
    });

    test('axe-core finds nothing serious on sign-in, a chat, a menu and a picker', { timeout: 90000 }, async () => {
      const gw = await gateway();
      const { page } = await device(viewport);
      await page.goto(`${gw.url}#token=not-the-token`);
      await page.locator('#signin-error', { hasText: 'refused' }).waitFor();
      assert.deepEqual(await axeViolations(page), [], 'sign-in with its error');

      await openSignedIn(page, gw.url);
      await send(page, 'Look at this:\n\n> a quoted line\n\n```js\nconst answer = 42;\n```\n\nand `inline code`.');
      await assistant(page, 'Echo: Look at this').waitFor();
      await userMsg(page, 'a quoted line').locator('blockquote').waitFor();
      assert.deepEqual(await axeViolations(page), [], 'a chat with messages');

      await page.getByRole('textbox', { name: 'Message' }).fill('/st');
      await page.getByRole('listbox', { name: 'Slash commands' }).waitFor();
      assert.deepEqual(await axeViolations(page), [], 'the command list');
      await page.keyboard.press('Escape');

      await page.getByRole('button', { name: 'Menu', exact: true }).click();
      await page.locator('#menu').waitFor();
      assert.deepEqual(await axeViolations(page), [], 'the open menu');
      await page.keyboard.press('Escape');

      await send(page, 'approve this');
      await page.locator('dialog#picker[open]').waitFor();
      assert.deepEqual(await axeViolations(page), [], 'a picker');
      await page.locator('dialog#picker[open]').getByRole('button', { name: 'Allow once' }).click();
      assert.deepEqual(pageErrors(page), []);
    });

    for (const scheme of ['light', 'dark']) {
      test(`axe-core finds nothing serious, nor a broken heading order, on a transcript with a stopped answer, a table and a code block (${scheme})`, { timeout: 90000 }, async () => {
        const gw = await gateway();
        const { page } = await device(viewport);
        await page.emulateMedia({ colorScheme: scheme });
        await openSignedIn(page, gw.url);
        await send(page, '# Summary\n\n| name | value |\n|---|---|\n| width | 390 |\n\n```rust\nfn main() { println!("a line long enough to scroll sideways on a phone screen"); }\n```');
        await assistant(page, 'Echo: # Summary').locator('table').waitFor();
        // `bench`: ten seconds of chunks, so Stop lands while the answer streams.
        await send(page, 'bench 400 25000');
        await page.locator('.msg.role-assistant.streaming .body', { hasText: /\d+ \d+/ }).waitFor();
        await page.getByRole('button', { name: 'Stop' }).click();
        await page.locator('.msg.role-assistant[data-ended=stopped]:not(.streaming) .ended', { hasText: 'Stopped' }).waitFor();
        await page.locator('#busy').waitFor({ state: 'hidden' });
        assert.equal(await page.evaluate(() => matchMedia('(prefers-color-scheme: dark)').matches), scheme === 'dark');
        assert.deepEqual(await axeViolations(page, ['heading-order']), [], `a transcript (${scheme})`);
        // The Settings view, with its device list, in the same theme (System follows the scheme).
        await page.getByRole('button', { name: 'Menu', exact: true }).click();
        await page.getByRole('menuitem', { name: 'Settings…' }).click();
        await page.getByRole('dialog', { name: 'Settings' }).locator('.settings-device').first().waitFor();
        assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), scheme);
        assert.deepEqual(await axeViolations(page, ['heading-order']), [], `Settings (${scheme})`);
        assert.deepEqual(pageErrors(page), []);
      });
    }

    test('the sign-in error is visibly an error', { timeout: 30000 }, async () => {
      const gw = await gateway();
      const { page } = await device(viewport);
      await page.goto(`${gw.url}#token=not-the-token`);
      const error = page.getByRole('alert');
      await error.filter({ hasText: 'The gateway refused the token' }).waitFor();
      const style = await error.evaluate((el) => {
        const s = getComputedStyle(el);
        const [r, g, b] = s.color.match(/\d+/g).map(Number);
        return { red: r > 120 && r > 2 * g && r > 2 * b, bg: s.backgroundColor };
      });
      assert.ok(style.red, 'the text is in the danger colour');
      assert.notEqual(style.bg, 'rgba(0, 0, 0, 0)', 'it stands on its own background');
      const icon = await error.locator('.error-icon').boundingBox();
      assert.ok(icon && icon.width >= 16, 'with an icon');
      assert.deepEqual(pageErrors(page).filter((e) => !/401|refused/.test(e)), []);
    });

    test('with two agents a new chat gets the default one, the chat list shows it, and the menu switches it', { timeout: 90000 }, async () => {
      const config = `[agents.beta]\ncommand = "${gatewayBin()} demo-agent"\nenv = { DEMO_EXTRA_COMMAND = "betaonly" }\n`;
      const { page } = await signedIn(viewport, { config });
      const openList = async () => { if (phone) await page.getByRole('button', { name: 'Open the chat list' }).click(); };
      const row = (chat) => page.locator('#channels .chan', { hasText: chat });

      await openList();
      assert.equal(await row('Default').locator('.chan-agent').textContent(), 'demo');
      if (phone) await page.keyboard.press('Escape');
      await newChat(page);
      await openList();
      assert.equal(await row('New chat').locator('.chan-agent').textContent(), 'demo');
      if (phone) await page.keyboard.press('Escape');
      const ask = page.locator('dialog#ask[open]');
      await page.getByRole('button', { name: 'Menu', exact: true }).click();
      await page.getByRole('menuitem', { name: 'Agent: demo…' }).click();
      const agent = ask.getByRole('combobox', { name: 'Agent' });
      assert.deepEqual(await agent.locator('option').allTextContents(), ['demo', 'beta']);
      await agent.selectOption('beta');
      await ask.getByRole('button', { name: 'OK' }).click();
      await page.locator('.msg.role-system', { hasText: 'now talks to beta' }).waitFor();
      await openList();
      assert.equal(await row('New chat').locator('.chan-agent').textContent(), 'beta');
      if (phone) await page.keyboard.press('Escape');

      // Its first message names it.
      await send(page, 'hello beta');
      await page.locator('#lane-title', { hasText: 'hello beta' }).waitFor();
      await assistant(page, 'Echo: hello beta').waitFor();
      await page.getByRole('textbox', { name: 'Message' }).fill('/betaonly');
      await page.getByRole('option', { name: /^\/betaonly/ }).waitFor();
      await page.keyboard.press('Escape');
      await page.getByRole('textbox', { name: 'Message' }).fill('');

      await page.getByRole('button', { name: 'Menu', exact: true }).click();
      await page.getByRole('menuitem', { name: 'Agent: beta…' }).click();
      await ask.getByRole('combobox', { name: 'Agent' }).selectOption('demo');
      await ask.getByRole('button', { name: 'OK' }).click();
      await page.locator('.msg.role-system', { hasText: 'now talks to demo' }).waitFor();
      await openList();
      await row('hello beta').locator('.chan-agent', { hasText: 'demo' }).waitFor();
      assert.deepEqual(pageErrors(page), []);
    });

    test('a chat with a rendered answer (the README screenshot)', { timeout: 60000 }, async () => {
      const { page } = await signedIn(viewport);
      await send(page, 'think tool please');
      await assistant(page, 'Echo: think tool please').waitFor();
      await send(page, 'Plan for **today**:\n\n1. Read the logs\n2. Fix the `retry` loop\n3. Check that $t_{n+1} = 2\\,t_n$ holds\n\n```rust\nfn main() {\n    println!("hello");\n}\n```');
      const answer = assistant(page, 'Plan for today');
      await answer.waitFor();
      await answer.locator('.code-block [class^="hljs-"]').first().waitFor();
      await answer.locator('ol li', { hasText: 'Read the logs' }).waitFor();
      await answer.locator('ol li math').waitFor();
      await page.locator('#busy').waitFor({ state: 'hidden' });
      if (process.env.IRIS_SCREENSHOTS === '1') {
        const file = path.resolve(here, `../../../../docs/screenshots/web-${name}.png`);
        await page.screenshot({ path: file, animations: 'disabled' });
      }
      assert.deepEqual(pageErrors(page), []);
    });
  });
}
