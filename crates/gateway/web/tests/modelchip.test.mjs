// The model chip in the top bar, at phone and desktop size, through the real gateway with two
// demo agents: it names the chat's agent, and its model once an answer or a switch says which;
// "Choose a model…" opens the model picker on this device only and the switch shows on every
// device and after a reload; the chip's menu says what the chat used so far (answers, tokens,
// cost); "Agent: …" moves the chat to the other agent, whose model is not
// known until its first answer. On a phone the chip leaves the title its room.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  DESKTOP, PHONE, browserSuite, gatewayBin, openSignedIn, pageErrors, send, waitOnline,
} from './harness.mjs';

const suite = browserSuite(before, after);
const assistant = (page, text) => page.locator('.msg.role-assistant:not(.streaming)', { hasText: text });
const systemMsg = (page, text) => page.locator('.msg.role-system', { hasText: text });
const chip = (page) => page.locator('#model-chip');

/** Waits until the chip names `agent` and `model` ('' for none). */
async function chipSays(page, agent, model) {
  await page.waitForFunction(([a, m]) => {
    const c = document.getElementById('model-chip');
    return c.querySelector('.chip-agent').textContent === a && c.querySelector('.chip-model').textContent === m;
  }, [agent, model]);
}

describe('the model chip', { timeout: 300000 }, () => {
  for (const [size, viewport] of [['phone', PHONE], ['desktop', DESKTOP]]) {
    test(`it shows the chat's agent and model and changes both (${size})`, { timeout: 120000 }, async () => {
      const config = `[agents.beta]\ncommand = "${gatewayBin()} demo-agent"\n`;
      const gw = await suite.gateway({ config });
      const { page } = await suite.device(viewport);
      const other = await suite.device(DESKTOP);
      await openSignedIn(page, gw.url);
      await openSignedIn(other.page, gw.url);

      // A chat with no answer yet: the agent alone.
      await chipSays(page, 'demo', '');
      assert.equal(await chip(page).getAttribute('aria-label'), 'demo: agent and model (model not known yet)');
      await send(page, 'hello');
      for (const p of [page, other.page]) await chipSays(p, 'demo', 'echo');
      assert.equal(await chip(page).getAttribute('aria-label'), 'demo echo: agent and model');
      if (viewport === PHONE) {
        // The title keeps its room and nothing scrolls sideways.
        const title = await page.locator('#lane-title').boundingBox();
        const box = await chip(page).boundingBox();
        assert.ok(title.width >= 60, `the title is ${title.width}px wide`);
        assert.ok(box.x + box.width <= viewport.width, 'the chip fits on the screen');
        assert.equal(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), true);
      }

      // What the chat used so far, at the top of the chip's menu.
      await send(page, 'cost please');
      await assistant(page, 'Echo: cost please').waitFor();
      await chip(page).click();
      await page.locator('#chat-usage', { hasText: /^This chat: 2 answers · [\d,]+ tokens · \$0\.01$/ }).waitFor();
      await page.keyboard.press('Escape');
      await page.locator('.menu.popup').waitFor({ state: 'detached' });

      // Choose a model: the picker opens here only; the switch shows everywhere.
      await chip(page).click();
      await page.getByRole('menuitem', { name: 'Choose a model…' }).click();
      const dialog = page.locator('dialog#picker[open]');
      await dialog.getByRole('button', { name: 'Demo Echo (current)' }).waitFor();
      assert.equal(await other.page.locator('dialog#picker[open]').count(), 0, 'not opened on the other device');
      await dialog.getByRole('button', { name: 'Demo Verbose' }).click();
      await systemMsg(page, 'Model switched to demo:verbose.').waitFor();
      for (const p of [page, other.page]) await chipSays(p, 'demo', 'verbose');
      await page.reload();
      await waitOnline(page);
      await chipSays(page, 'demo', 'verbose');

      // Another agent: its model is not known until it answers.
      await chip(page).click();
      await page.getByRole('menuitem', { name: 'Agent: demo…' }).click();
      const ask = page.locator('dialog#ask[open]');
      await ask.getByRole('combobox', { name: 'Agent' }).selectOption('beta');
      await ask.getByRole('button', { name: 'OK' }).click();
      await systemMsg(page, 'now talks to beta').waitFor();
      for (const p of [page, other.page]) await chipSays(p, 'beta', '');
      await send(page, 'hello beta');
      await assistant(page, 'Echo: hello beta').waitFor();
      for (const p of [page, other.page]) await chipSays(p, 'beta', 'echo');
      await other.page.reload();
      await waitOnline(other.page);
      await chipSays(other.page, 'beta', 'echo');
      assert.deepEqual(pageErrors(page), []);
      assert.deepEqual(pageErrors(other.page), []);
    });
  }
});
