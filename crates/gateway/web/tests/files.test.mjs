//! The Files view of Iris Web, at phone and desktop size, against the real gateway: the menu's
//! "Files…" lists the chat's agent's working directory (folders first, secrets hidden and
//! counted, a name with a control character shown escaped), a Rust file opens highlighted, an
//! image shows inline, a file downloads with its bytes, and a symlink out of the directory shows
//! the gateway's refusal. The name of a file a tool call changed opens it there.

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import {
  DESKTOP, PHONE, browserSuite, noisePng, openSignedIn, pageErrors, send, shot,
} from './harness.mjs';

const suite = browserSuite(before, after);
const SIZES = [['phone', PHONE], ['desktop', DESKTOP]];
const RUST = 'fn main() {\n    let greeting = "hello";\n    println!("{greeting}");\n}\n';

/** A working directory with a source file, an image, data, secrets and a way out. */
function workDir() {
  const root = mkdtempSync(path.join(tmpdir(), 'iris-files-'));
  const work = path.join(root, 'work');
  mkdirSync(path.join(work, 'src'), { recursive: true });
  mkdirSync(path.join(root, 'outside'));
  writeFileSync(path.join(root, 'outside', 'secret.txt'), 'outside');
  writeFileSync(path.join(work, 'src', 'main.rs'), RUST);
  writeFileSync(path.join(work, 'pic.png'), noisePng(8, 8));
  writeFileSync(path.join(work, 'data.bin'), Buffer.from([0, 1, 2, 3, 255, 0, 7]));
  writeFileSync(path.join(work, '.env'), 'TOKEN=secret');
  writeFileSync(path.join(work, 'id_rsa'), 'key');
  writeFileSync(path.join(work, 'bad\u001bname.txt'), 'escape');
  symlinkSync('../outside', path.join(work, 'way_out'));
  return { root, work };
}

describe('the Files view', { timeout: 240000 }, () => {
  for (const [size, viewport] of SIZES) {
    test(`Files lists, opens text and images, downloads, and shows refusals (${size})`, { timeout: 120000 }, async () => {
      const { work } = workDir();
      const gw = await suite.gateway({ config: `[agent]\ncwd = ${JSON.stringify(work)}\n` });
      const { page } = await suite.device(viewport);
      await openSignedIn(page, gw.url);

      await page.getByRole('button', { name: 'Menu', exact: true }).click();
      await page.getByRole('menuitem', { name: 'Files…' }).click();
      const dialog = page.getByRole('dialog', { name: 'Files' });
      await dialog.waitFor();
      const entries = dialog.getByRole('list', { name: 'Entries' });
      await entries.waitFor();
      const names = await entries.locator('.files-name').allTextContents();
      assert.equal(names[0], 'src/', 'folders first');
      assert.ok(names.includes('bad\\u{1b}name.txt'), `escaped name in ${names}`);
      assert.ok(!names.some((n) => n.includes('.env') || n.includes('id_rsa')), `secrets hidden: ${names}`);
      await dialog.getByText('2 hidden (.git and secret files).').waitFor();

      // A Rust file opens highlighted.
      await entries.getByRole('button', { name: /^src\// }).click();
      await dialog.getByRole('button', { name: /^main\.rs/ }).click();
      const code = dialog.locator('pre.files-text code');
      await code.locator('.hljs-keyword', { hasText: 'fn' }).first().waitFor();
      assert.equal(await code.textContent(), RUST);
      await shot(page, `files-text-${size}`);

      // Back to the top through the path; the image shows inline from its pulled bytes.
      await dialog.getByRole('navigation', { name: 'Folder' }).getByRole('button', { name: 'demo' }).click();
      await dialog.getByRole('button', { name: /^pic\.png/ }).click();
      const img = dialog.locator('img.files-image');
      await page.waitForFunction(() => {
        const i = document.querySelector('img.files-image');
        return i && i.complete && i.naturalWidth === 8;
      });
      assert.match(await img.getAttribute('src'), /^blob:/);

      // A binary file downloads with its bytes.
      await dialog.getByRole('navigation', { name: 'Folder' }).getByRole('button', { name: 'demo' }).click();
      await dialog.getByRole('button', { name: /^data\.bin/ }).click();
      await dialog.getByText('This file is not text.').waitFor();
      const [download] = await Promise.all([
        page.waitForEvent('download'),
        dialog.getByRole('button', { name: 'Download' }).click(),
      ]);
      assert.equal(download.suggestedFilename(), 'data.bin');
      assert.deepEqual([...readFileSync(await download.path())], [0, 1, 2, 3, 255, 0, 7]);

      // The way out is refused with the gateway's reason.
      await dialog.getByRole('navigation', { name: 'Folder' }).getByRole('button', { name: 'demo' }).click();
      await dialog.getByRole('button', { name: /^way_out/ }).click();
      await dialog.getByRole('alert').filter({ hasText: 'outside the agent\'s working directory' }).waitFor();
      await shot(page, `files-refused-${size}`);
      assert.deepEqual(pageErrors(page), []);
    });

    test(`a changed file's name in a tool card opens it in Files (${size})`, { timeout: 120000 }, async () => {
      const { work } = workDir();
      writeFileSync(path.join(work, 'notes.txt'), 'one\n2\nthree\nfour\n');
      const gw = await suite.gateway({ config: `[agent]\ncwd = ${JSON.stringify(work)}\n` });
      const { page } = await suite.device(viewport);
      await openSignedIn(page, gw.url);
      // The demo agent's `edit` names <cwd>/notes.txt, an absolute path, as ACP has it.
      await send(page, 'edit');
      const card = page.locator('details.tool', { has: page.locator('.change') });
      const name = card.getByRole('button', { name: 'Open notes.txt' });
      await name.waitFor();
      assert.equal(await name.getAttribute('title'), path.join(work, 'notes.txt'));
      await name.click();
      const dialog = page.getByRole('dialog', { name: 'Files' });
      const code = dialog.locator('pre.files-text code');
      await code.waitFor();
      assert.equal(await code.textContent(), 'one\n2\nthree\nfour\n');
      assert.equal(await dialog.locator('.files-current').textContent(), 'notes.txt', 'shown by its path in the directory');
      await shot(page, `files-from-change-${size}`);
      // From there, the directory it is in.
      await dialog.getByRole('navigation', { name: 'Folder' }).getByRole('button', { name: 'demo' }).click();
      await dialog.getByRole('button', { name: /^notes\.txt/ }).waitFor();
      assert.deepEqual(pageErrors(page), []);
    });
  }
});
