// End-to-end tests of Iris Web: Debian's headless Chromium (via playwright-core) against the
// real gateway binary and its built-in demo agent, driven the way a person uses the page.
// Screenshots of the main states land in artifacts/.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  DESKTOP, PHONE, Proxy, TOKEN, browserSuite, newChat, noisePng, openSignedIn, pageErrors, send, shot, waitOnline,
} from './harness.mjs';

const suite = browserSuite(before, after);

const gateway = suite.gateway;
const device = suite.device;

const assistant = (page, text) => page.locator('.msg.role-assistant:not(.streaming)', { hasText: text });
const userMsg = (page, text) => page.locator('.msg.role-user', { hasText: text });
const systemMsg = (page, text) => page.locator('.msg.role-system', { hasText: text });

describe('Iris Web', { timeout: 240000 }, () => {
  test('pairing by URL fragment signs in, drops the token from the address bar, and survives a reload', { timeout: 60000 }, async () => {
    const gw = await gateway();
    const { page } = await device(PHONE);

    await page.goto(gw.url);
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    await shot(page, 'signin-phone');

    await page.goto(`${gw.url}#token=not-the-token-at-all`);
    await page.locator('#signin-error', { hasText: 'refused' }).waitFor();

    await page.goto(`${gw.url}#token=${encodeURIComponent(TOKEN)}`);
    await waitOnline(page);
    assert.equal(new URL(page.url()).hash, '', 'the token is removed from the address bar');
    assert.equal(await page.locator('#lane-title').textContent(), 'Default');
    const stored = await page.evaluate(() => ({ token: localStorage.getItem('iris.token'), device: localStorage.getItem('iris.device_id') }));
    assert.equal(stored.token, TOKEN);
    assert.match(stored.device, /^web_[0-9a-f]{18}$/);

    await page.reload();
    await waitOnline(page);
    assert.equal(await page.locator('#signin').isHidden(), true, 'no sign-in after a reload');
    assert.equal(await page.evaluate(() => localStorage.getItem('iris.device_id')), stored.device, 'the device id is stable');
    await shot(page, 'empty-chat-phone');
    assert.deepEqual(pageErrors(page), []);
  });

  test('a streamed answer shows its commentary, a tool card and reasoning above the text', { timeout: 60000 }, async () => {
    const gw = await gateway();
    const { page } = await device(DESKTOP);
    await openSignedIn(page, gw.url);

    await send(page, 'think tool slow please');
    // While it streams: a growing bubble, the busy bar with Stop.
    const streaming = page.locator('.msg.role-assistant.streaming', { hasText: 'tick 3' });
    await streaming.waitFor();
    assert.equal(await page.getByRole('button', { name: 'Stop' }).isVisible(), true);
    await page.locator('#busy-text', { hasText: 'Writing…' }).waitFor();
    await shot(page, 'streaming-desktop');

    const answer = assistant(page, 'Echo: think tool slow please');
    await answer.waitFor();
    assert.match(await answer.locator('.body').textContent(), /tick 19/);
    assert.equal(await page.locator('.msg.role-assistant').count(), 1, 'one bubble for the answer');

    const tool = page.locator('details.tool.ok', { hasText: 'terminal' });
    await tool.waitFor();
    assert.match(await tool.locator('summary').textContent(), /terminal\s*echo hello/);
    assert.equal(await tool.locator('summary svg.lucide').count(), 2, 'a tool icon and a state icon');
    await tool.locator('summary').click();
    assert.match(await tool.locator('.tool-body').textContent(), /Output\s*hello/);
    await page.locator('.commentary', { hasText: 'Let me run a command.' }).waitFor();

    const reasoning = answer.locator('details.reasoning');
    assert.equal(await answer.evaluate((el) => el.firstElementChild.matches('details.reasoning')), true, 'reasoning is above the text');
    await reasoning.locator('summary').click();
    assert.match(await reasoning.textContent(), /Thinking about what you said…/);
    assert.match(await answer.locator('.runtime').textContent(), /echo · \d+% ctx · [\d.]+ s/);

    await page.locator('#busy').waitFor({ state: 'hidden' });
    await userMsg(page, 'think tool slow please').locator('.ticks', { hasText: '✓✓' }).waitFor();
    await shot(page, 'answer-desktop');
    assert.deepEqual(pageErrors(page), []);
  });

  test('a stopped answer is marked as stopped, live and after a reload', { timeout: 60000 }, async () => {
    const gw = await gateway();
    const { page } = await device(DESKTOP);
    await openSignedIn(page, gw.url);

    // Text, then nothing until it is stopped: Stop never races the end of the answer.
    await send(page, 'linger story');
    await page.locator('.msg.role-assistant.streaming', { hasText: 'Lingering.' }).waitFor();
    await page.getByRole('button', { name: 'Stop' }).click();
    const stopped = page.locator('.msg.role-assistant:not(.streaming) .ended-stopped', { hasText: 'Stopped' });
    await stopped.waitFor();
    await send(page, 'hello again');
    await assistant(page, 'Echo: hello again').waitFor();
    assert.equal(await page.locator('.msg .ended').count(), 1, 'a completed answer carries no mark');

    await page.reload();
    await waitOnline(page);
    await assistant(page, 'Echo: hello again').waitFor();
    assert.equal(await stopped.count(), 1, 'history keeps the mark');
    assert.deepEqual(pageErrors(page), []);
  });

  test('a reload shows the same cards as the live turn, and a stopped answer offers Retry', { timeout: 90000 }, async () => {
    const gw = await gateway();
    const { page } = await device(DESKTOP);
    await openSignedIn(page, gw.url);
    // Every item of the lane as a person reads it, in order (date separators: view.test.mjs).
    const transcript = () => page.evaluate(() => [...document.querySelectorAll('#log .lane > :not(.day-sep)')].map((el) => {
      if (el.matches('.msg')) {
        const ended = el.querySelector('.ended');
        return `${el.dataset.role}: ${el.querySelector('.body').textContent.trim()}${ended ? ` [${ended.textContent}]` : ''}`;
      }
      if (el.matches('details.tool')) return `${el.className}: ${el.querySelector('summary').textContent}`;
      if (el.matches('.commentary')) return `commentary: ${el.textContent.trim()}`;
      if (el.matches('.picker-card')) return `picker: ${el.textContent}`;
      return `other: ${el.className}`;
    }));

    await send(page, 'plan tool approve linger');
    const dialog = page.locator('dialog#picker[open]');
    await dialog.getByRole('button', { name: 'Allow once' }).click();
    await page.locator('.msg.role-assistant.streaming', { hasText: 'Lingering.' }).waitFor();
    await page.getByRole('button', { name: 'Stop' }).click();
    const stopped = page.locator('.msg.role-assistant:not(.streaming)', { has: page.locator('.ended-stopped') });
    await stopped.waitFor();
    await page.locator('#busy').waitFor({ state: 'hidden' });
    const live = await transcript();
    assert.deepEqual(live.filter((l) => !l.startsWith('user') && !l.startsWith('assistant')).map((l) => l.split(':')[0]), [
      'commentary', 'commentary', 'tool ok', 'commentary', 'tool ok', 'picker',
    ], live.join('\n'));
    assert.match(live[1], /Plan:/);
    assert.match(live.at(-2), /Approval requested: .*— you chose Allow once/);

    await page.reload();
    await waitOnline(page);
    await stopped.waitFor();
    assert.deepEqual(await transcript(), live, 'the reloaded page shows what the live one did');
    await shot(page, 'reloaded-turn-desktop');

    // Retry from the stopped answer's menu runs the prompt again as a new turn.
    await stopped.locator('.msg-more').click();
    await page.getByRole('menuitem', { name: 'Retry' }).click();
    await dialog.getByRole('button', { name: 'Allow once' }).click();
    await page.locator('.msg.role-assistant.streaming', { hasText: 'Lingering.' }).waitFor();
    assert.equal(await page.locator('.msg.role-user').count(), 1, 'a retry adds no user message');
    await page.getByRole('button', { name: 'Stop' }).click();
    await page.locator('#busy').waitFor({ state: 'hidden' });
    // A completed answer offers no Retry.
    await send(page, 'hello');
    await assistant(page, 'Echo: hello').locator('.msg-more').click();
    await page.getByRole('menuitem', { name: 'Delete' }).waitFor();
    assert.equal(await page.getByRole('menuitem', { name: 'Retry' }).count(), 0);
    assert.deepEqual(pageErrors(page), []);
  });

  test('agent text is shown as text: no markup from it ever reaches the page', { timeout: 60000 }, async () => {
    const gw = await gateway();
    const { page } = await device(DESKTOP);
    await openSignedIn(page, gw.url);

    const evil = '<img src=x onerror="window.pwned=1"> <script>window.pwned=2</script> **bold** [link](javascript:window.pwned=3) `code`';
    await send(page, evil);
    const answer = assistant(page, 'Echo: <img src=x');
    await answer.waitFor();
    assert.equal(await answer.locator('img, script').count(), 0);
    assert.equal(await answer.locator('strong').textContent(), 'bold');
    assert.equal(await answer.locator('code').textContent(), 'code');
    assert.equal(await answer.locator('a').count(), 0, 'a javascript: link stays text');
    assert.match(await answer.locator('.body').textContent(), /<script>window\.pwned=2<\/script>/);
    assert.equal(await page.evaluate(() => window.pwned), undefined);
  });

  test('an approval is answered in the page', { timeout: 60000 }, async () => {
    const gw = await gateway();
    const { page } = await device(PHONE);
    await openSignedIn(page, gw.url);

    await send(page, 'approve this please');
    const dialog = page.locator('dialog#picker[open]');
    await dialog.waitFor();
    await dialog.getByRole('heading').waitFor();
    assert.match(await dialog.locator('pre.preview').textContent(), /\S/);
    assert.match(await page.locator('#busy-text').textContent(), /Waiting for you/);
    await shot(page, 'approval-phone');

    await dialog.getByRole('button', { name: 'Allow once' }).click();
    await assistant(page, 'Permission granted: allow_once.').waitFor();
    assert.equal(await page.locator('dialog#picker[open]').count(), 0);
    await page.locator('.picker-card.done', { hasText: 'you chose Allow once' }).waitFor();
    assert.deepEqual(pageErrors(page), []);
  });

  test('approvals asked all at once are shown one after another, at most eight, and each fits the screen', { timeout: 90000 }, async () => {
    const gw = await gateway();
    const { page } = await device(PHONE);
    await openSignedIn(page, gw.url);

    // The demo agent asks 20 approvals at once, each with a 10,000-character title and 40 long
    // options; the gateway shows 8, with 16 choices each.
    await send(page, 'pester');
    for (let i = 0; i < 8; i++) {
      const dialog = page.locator('dialog#picker[open]');
      // The answered approval's buttons stay disabled until the next one replaces it.
      await dialog.locator('.choices button:not([disabled])').first().waitFor();
      const choices = dialog.locator('.choices button');
      assert.equal(await choices.count(), 16, `approval ${i + 1}`);
      assert.ok(await dialog.evaluate((d) => d.scrollWidth <= d.clientWidth), `approval ${i + 1} fits the width`);
      const title = await dialog.locator('#picker-title').boundingBox();
      assert.ok(title.height < PHONE.height / 3, `its title leaves room for the choices (${title.height}px)`);
      if (i === 0) await shot(page, 'approval-long-phone');
      await choices.first().click();
    }
    await assistant(page, 'Pestered: 8 answered, 12 cancelled.').waitFor();
    for (const card of await page.locator('.picker-card').all()) {
      const box = await card.boundingBox();
      assert.ok(box.x + box.width <= PHONE.width && box.height < PHONE.height / 4, `a card stays a few lines of the lane (${JSON.stringify(box)})`);
    }
    assert.equal(await page.locator('dialog#picker[open]').count(), 0);
    assert.deepEqual(pageErrors(page), []);
  });

  test('an approval answered on another device closes the stale dialog here', { timeout: 60000 }, async () => {
    const gw = await gateway();
    const a = await device(DESKTOP);
    const b = await device(PHONE);
    await openSignedIn(a.page, gw.url);
    await openSignedIn(b.page, gw.url);

    await send(a.page, 'permission to proceed?');
    await a.page.locator('dialog#picker[open]').waitFor();
    const onB = b.page.locator('dialog#picker[open]');
    await onB.getByRole('button', { name: 'Deny' }).click();
    await assistant(a.page, 'Permission denied.').waitFor();
    await a.page.locator('dialog#picker[open]').waitFor({ state: 'detached' });
    await a.page.locator('.picker-card.done', { hasText: 'answered elsewhere' }).waitFor();
    assert.deepEqual(pageErrors(a.page), []);
  });

  test('the model picker switches the model, grouped by provider', { timeout: 60000 }, async () => {
    const gw = await gateway();
    const { page } = await device(DESKTOP);
    await openSignedIn(page, gw.url);

    await send(page, 'hello');
    await assistant(page, 'Echo: hello').waitFor();
    await send(page, '/model');
    const dialog = page.locator('dialog#picker[open]');
    await dialog.getByRole('heading', { name: 'Choose a model' }).waitFor();
    assert.equal(await dialog.locator('fieldset legend').first().textContent(), 'demo');
    await dialog.getByRole('button', { name: 'Demo Echo (current)' }).waitFor();
    await shot(page, 'model-picker-desktop');

    await dialog.getByRole('button', { name: 'Demo Verbose' }).click();
    await systemMsg(page, 'Model switched to demo:verbose.').waitFor();
    assert.equal(await page.locator('dialog#picker[open]').count(), 0);
    await send(page, 'and now?');
    await assistant(page, '(model: demo:verbose)').waitFor();
    assert.deepEqual(pageErrors(page), []);
  });

  test('a slash command is picked from the drawer by fuzzy prefix', { timeout: 60000 }, async () => {
    const gw = await gateway();
    const { page } = await device(PHONE);
    await openSignedIn(page, gw.url);

    const box = page.getByRole('textbox', { name: 'Message' });
    await box.fill('/st');
    const drawer = page.getByRole('listbox', { name: 'Slash commands' });
    await drawer.getByRole('option', { name: /\/status/ }).waitFor();
    await drawer.getByRole('option', { name: /\/stop/ }).waitFor();
    await box.fill('/sts');
    assert.match(await drawer.getByRole('option').first().textContent(), /^\/status/);
    await shot(page, 'drawer-phone');

    await drawer.getByRole('option', { name: /\/status/ }).click();
    assert.equal(await box.inputValue(), '/status ');
    assert.equal(await drawer.isHidden(), true);
    await box.press('Enter');
    const reply = systemMsg(page, 'Agent:');
    await reply.waitFor();
    assert.match(await reply.textContent(), /Model:/);

    // The / action (behind "+" on a phone) opens the whole catalog.
    await page.getByRole('button', { name: 'More actions' }).click();
    await page.getByRole('menuitem', { name: 'Slash commands' }).click();
    await drawer.getByRole('option', { name: /\/help/ }).waitFor();
    assert.deepEqual(pageErrors(page), []);
  });

  test('search finds an old message and jumps to it, loading older pages', { timeout: 120000 }, async () => {
    const gw = await gateway({ agent: 'none', config: '[limits]\nsends_per_minute = 6000\n' });
    const { page } = await device(DESKTOP);
    await openSignedIn(page, gw.url);

    await send(page, 'the haystack hides a needle');
    await userMsg(page, 'needle').waitFor();
    for (let i = 1; i <= 59; i++) {
      await send(page, `filler message number ${i}`);
      await page.locator('.msg.role-user').nth(i).waitFor();
    }
    await page.reload();
    await waitOnline(page);
    await userMsg(page, 'filler message number 59').waitFor();
    assert.equal(await userMsg(page, 'needle').count(), 0, 'the old message is not on the first page');

    await page.getByRole('button', { name: 'Search messages' }).click();
    await page.getByRole('searchbox', { name: 'Search messages' }).fill('needle');
    await page.getByRole('searchbox', { name: 'Search messages' }).press('Enter');
    const hit = page.locator('#search-results .hit', { hasText: 'needle' });
    await hit.waitFor();
    assert.equal(await hit.locator('mark').textContent(), 'needle');
    assert.match(await hit.locator('.hit-lane').textContent(), /^Default/);
    await shot(page, 'search-desktop');

    await hit.click();
    const target = userMsg(page, 'needle');
    await target.waitFor();
    assert.equal(await target.evaluate((el) => el.classList.contains('flash')), true);
    const box = await target.boundingBox();
    assert.ok(box && box.y >= 0 && box.y < DESKTOP.height, 'the message is scrolled into view');
    assert.equal(await page.locator('.msg.role-user').count(), 60, 'every page loaded once');
    await shot(page, 'jumped-desktop');
    assert.deepEqual(pageErrors(page), []);
  });

  test('channels and threads: create, auto-thread on send, rename, set default, delete', { timeout: 60000 }, async () => {
    const gw = await gateway();
    const a = await device(DESKTOP);
    const b = await device(PHONE);
    await openSignedIn(a.page, gw.url);
    await openSignedIn(b.page, gw.url);
    const page = a.page;

    await newChat(page, 'Alpha');
    const ask = page.locator('dialog#ask[open]');

    await page.getByRole('button', { name: 'Send as a new thread' }).click();
    await send(page, 'plan the trip to the coast');
    await page.locator('#lane-title', { hasText: 'Alpha › plan the trip to the coast' }).waitFor();
    await assistant(page, 'Echo: plan the trip to the coast').waitFor();
    await page.locator('.threads .chan', { hasText: 'plan the trip to the coast' }).waitFor();
    assert.equal(await page.getByRole('button', { name: 'Send as a new thread' }).getAttribute('aria-pressed'), 'false');
    await shot(page, 'threads-desktop');

    await page.getByRole('button', { name: 'Actions for Alpha' }).click();
    await page.getByRole('menuitem', { name: 'Rename' }).click();
    await ask.getByRole('textbox').fill('Beta');
    await ask.getByRole('button', { name: 'OK' }).click();
    await page.locator('#lane-title', { hasText: 'Beta › plan the trip' }).waitFor();

    await page.getByRole('button', { name: 'Actions for Beta' }).click();
    await page.getByRole('menuitem', { name: 'Set as default' }).click();
    await page.locator('li[data-chat] .chan', { hasText: 'Beta' }).locator('.chan-default').waitFor();

    // The other device follows every change of the directory.
    await b.page.getByRole('button', { name: 'Open the chat list' }).click();
    await b.page.locator('.chan', { hasText: 'Beta' }).locator('.chan-default').waitFor();
    await b.page.locator('.threads .chan', { hasText: 'plan the trip to the coast' }).waitFor();
    await shot(b.page, 'sidebar-phone');

    await page.getByRole('button', { name: 'Actions for plan the trip to the coast' }).click();
    await page.getByRole('menuitem', { name: 'Delete' }).click();
    await ask.getByRole('button', { name: 'Delete' }).click();
    await page.locator('#lane-title', { hasText: /^Beta$/ }).waitFor();
    await b.page.locator('.threads .chan', { hasText: 'plan the trip' }).waitFor({ state: 'detached' });
    assert.deepEqual(pageErrors(page), []);
    assert.deepEqual(pageErrors(b.page), []);
  });

  test('a delete on one device removes the message on another', { timeout: 60000 }, async () => {
    const gw = await gateway();
    const a = await device(DESKTOP);
    const b = await device(PHONE);
    await openSignedIn(a.page, gw.url);
    await openSignedIn(b.page, gw.url);

    await send(a.page, 'please delete me');
    await assistant(a.page, 'Echo: please delete me').waitFor();
    await userMsg(b.page, 'please delete me').waitFor();
    await assistant(b.page, 'Echo: please delete me').waitFor();

    await userMsg(a.page, 'please delete me').getByRole('button', { name: 'Message actions' }).click();
    await a.page.getByRole('menuitem', { name: 'Delete' }).click();
    await a.page.locator('dialog#ask[open]').getByRole('button', { name: 'Delete' }).click();

    await userMsg(a.page, 'please delete me').waitFor({ state: 'detached' });
    await userMsg(b.page, 'please delete me').waitFor({ state: 'detached' });
    assert.equal(await assistant(b.page, 'Echo: please delete me').count(), 1, 'only the chosen message goes');
    await shot(b.page, 'deleted-on-second-device-phone');
    assert.deepEqual(pageErrors(a.page), []);
    assert.deepEqual(pageErrors(b.page), []);
  });

  test('after an offline gap the page syncs what it missed, without duplicate bubbles', { timeout: 90000 }, async () => {
    const gw = await gateway();
    const proxy = await new Proxy(gw.port).listen();
    suite.cleanups.push(() => proxy.close());
    const a = await device(PHONE);
    const b = await device(DESKTOP);
    await openSignedIn(a.page, proxy.url);
    await openSignedIn(b.page, gw.url);

    await send(a.page, 'before the gap');
    await assistant(a.page, 'Echo: before the gap').waitFor();

    proxy.cut();
    await a.page.locator('#banner', { hasText: 'Connection lost' }).waitFor();
    await shot(a.page, 'offline-phone');

    await send(b.page, 'sent while the phone was away');
    await assistant(b.page, 'Echo: sent while the phone was away').waitFor();
    await send(b.page, 'think about a second one');
    await assistant(b.page, 'Echo: think about a second one').waitFor();

    proxy.restore();
    await waitOnline(a.page);
    await assistant(a.page, 'Echo: think about a second one').waitFor();
    const counts = async () => a.page.evaluate(() => {
      const n = (sel, text) => [...document.querySelectorAll(sel)].filter((e) => e.dataset.text === text).length;
      return [
        n('.msg.role-user', 'before the gap'), n('.msg.role-assistant', 'Echo: before the gap'),
        n('.msg.role-user', 'sent while the phone was away'), n('.msg.role-assistant', 'Echo: sent while the phone was away'),
        n('.msg.role-user', 'think about a second one'), n('.msg.role-assistant', 'Echo: think about a second one'),
      ];
    });
    assert.deepEqual(await counts(), [1, 1, 1, 1, 1, 1]);
    assert.equal(await a.page.locator('#banner').isHidden(), true);
    await shot(a.page, 'synced-phone');

    // A reload starts from the stored cursor: the history page and the replay still agree.
    await a.page.reload();
    await waitOnline(a.page);
    await assistant(a.page, 'Echo: think about a second one').waitFor();
    assert.deepEqual(await counts(), [1, 1, 1, 1, 1, 1]);
    assert.deepEqual(pageErrors(a.page), []);
  });

  test('a gateway restart shows the restarting notice, then the page reconnects', { timeout: 90000 }, async () => {
    const gw = await gateway();
    const { page } = await device(DESKTOP);
    await openSignedIn(page, gw.url);
    await send(page, 'before the restart');
    await assistant(page, 'Echo: before the restart').waitFor();

    await gw.stop();
    await page.locator('#banner.restarting', { hasText: 'Gateway restarting' }).waitFor();
    await page.locator('.notice', { hasText: 'Gateway restarting' }).waitFor();
    await shot(page, 'restarting-desktop');

    await gw.start();
    await waitOnline(page);
    assert.equal(await page.locator('#banner').isHidden(), true);
    await send(page, 'after the restart');
    await assistant(page, 'Echo: after the restart').waitFor();
    assert.equal(await assistant(page, 'Echo: before the restart').count(), 1);
    assert.deepEqual(pageErrors(page), []);
  });

  test('an image upload shows its progress, then the image inline on both devices', { timeout: 90000 }, async () => {
    const gw = await gateway();
    const a = await device(DESKTOP);
    const b = await device(PHONE);
    await openSignedIn(a.page, gw.url);
    await openSignedIn(b.page, gw.url);

    await a.page.evaluate(() => {
      window.progressSeen = [];
      new MutationObserver(() => {
        for (const p of document.querySelectorAll('#tray progress')) window.progressSeen.push(Number(p.value));
      }).observe(document.getElementById('tray'), { subtree: true, attributes: true, childList: true });
    });
    const png = noisePng(1200, 900);
    await a.page.locator('#file-input').setInputFiles({ name: 'noise.png', mimeType: 'image/png', buffer: png });
    await a.page.locator('#tray .attachment[data-state=done]').waitFor({ timeout: 30000 });
    const seen = await a.page.evaluate(() => window.progressSeen);
    assert.ok(seen.some((v) => v > 0 && v < 100), `a partial progress was shown (${JSON.stringify(seen)})`);
    await shot(a.page, 'upload-ready-desktop');

    await send(a.page, 'a picture of noise');
    for (const page of [a.page, b.page]) {
      const img = userMsg(page, 'a picture of noise').locator('img.inline-image');
      await img.waitFor();
      await page.waitForFunction((el) => el.complete && el.naturalWidth > 0, await img.elementHandle(), { timeout: 30000 });
      assert.deepEqual(await img.evaluate((el) => [el.naturalWidth, el.naturalHeight]), [1200, 900]);
    }
    await shot(a.page, 'image-desktop');
    await shot(b.page, 'image-phone');
    assert.deepEqual(pageErrors(a.page), []);
    assert.deepEqual(pageErrors(b.page), []);
  });
});
