//! An agent's form question (ACP elicitation, as Claude Code asks its questions) in Iris Web,
//! against the real gateway and its demo agent (`elicit`: "Which color do you prefer?", the
//! choices Red and Blue and a typed answer; `elicit two`: two questions in one form): the question
//! shows with its choices and a box for a typed answer; a choice and a typed answer each reach the
//! agent; the two questions of one form come one after the other, and the second device sees each
//! closed once it is answered.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  DESKTOP, PHONE, browserSuite, openSignedIn, pageErrors, send, shot,
} from './harness.mjs';

const suite = browserSuite(before, after);
const picker = (page) => page.locator('dialog#picker[open]');
const answer = (page, text) => page.locator('.msg.role-assistant:not(.streaming)', { hasText: text });

describe('form questions', { timeout: 240000 }, () => {
  test('a choice and a typed answer reach the agent (phone)', { timeout: 120000 }, async () => {
    const gw = await suite.gateway();
    const { page } = await suite.device(PHONE);
    await openSignedIn(page, gw.url);

    await send(page, 'elicit');
    const asked = picker(page);
    await asked.getByRole('heading', { name: /Which color do you prefer\?/ }).waitFor();
    await asked.getByRole('button', { name: 'Red' }).waitFor();
    await asked.getByRole('textbox', { name: 'Your answer' }).waitFor();
    await shot(page, 'elicit-phone');
    await asked.getByRole('button', { name: 'Blue' }).click();
    await answer(page, 'You answered').waitFor();
    assert.match(await answer(page, 'You answered').textContent(), /"color":\s*"blue"/);

    await send(page, 'elicit again');
    await asked.getByRole('textbox', { name: 'Your answer' }).fill('Green, like grass');
    await asked.getByRole('button', { name: 'Answer' }).click();
    const typed = answer(page, 'Green, like grass');
    await typed.waitFor();
    assert.match(await typed.textContent(), /"other":\s*"Green, like grass"/);
    assert.deepEqual(pageErrors(page), []);
  });

  test('two questions of one form come one after the other, on every device (desktop)', { timeout: 120000 }, async () => {
    const gw = await suite.gateway();
    const { page } = await suite.device(DESKTOP);
    const other = await suite.device(DESKTOP);
    await openSignedIn(page, gw.url);
    await openSignedIn(other.page, gw.url);

    await send(page, 'elicit two');
    const first = picker(page);
    await first.getByRole('heading', { name: /^\(1\/2\)/ }).waitFor();
    await picker(other.page).getByRole('heading', { name: /^\(1\/2\)/ }).waitFor();
    await first.getByRole('button', { name: 'Red' }).click();
    // The second question follows on both devices; the first is closed on the other.
    await picker(page).getByRole('heading', { name: /^\(2\/2\)/ }).waitFor();
    await picker(other.page).getByRole('heading', { name: /^\(2\/2\)/ }).waitFor();
    await picker(other.page).getByRole('button', { name: 'Yes' }).click();
    const done = answer(page, 'You answered');
    await done.waitFor();
    const text = await done.textContent();
    assert.match(text, /"color":\s*"red"/);
    assert.match(text, /"large":\s*true/);
    await picker(page).waitFor({ state: 'hidden' });
    assert.deepEqual(pageErrors(page), []);
    assert.deepEqual(pageErrors(other.page), []);
  });
});
