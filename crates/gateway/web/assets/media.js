// Media transfer over the WebSocket (protocol notes §6): uploads as media.upload.start, binary
// chunks, media.upload.end {sha256} → media.upload.ack; pulls as media.pull → a media.pull header,
// binary chunks, media.pull.end. Binary frames carry no id, so each direction runs one transfer
// at a time; the queues below serialize them.

import { RequestError } from './conn.js';
import { sha256 } from './vendor/noble-hashes/sha2.js';
import { bytesToHex } from './vendor/noble-hashes/utils.js';
import { blobType, mediaKind, randomId } from './util.js';

// Small enough for a smooth progress bar, large enough that frame overhead does not matter.
const CHUNK = 128 * 1024;
const HIGH_WATER = 512 * 1024;

const nextTick = (ms = 16) => new Promise((r) => setTimeout(r, ms));

export class Media {
  constructor(conn) {
    this.conn = conn;
    this.uploads = Promise.resolve();
    this.pulls = Promise.resolve();
    this.urls = new Map(); // media_id → object URL
    this.inflight = new Map(); // media_id → Promise<url>
  }

  /**
   * Uploads a File; resolves with its media_ref once the gateway acknowledged it. `opts.voice`:
   * a voice note recorded here (the gateway transcribes it).
   */
  upload(file, onProgress = () => {}, opts = {}) {
    const run = () => this.uploadNow(file, onProgress, opts);
    const p = this.uploads.then(run, run);
    this.uploads = p.catch(() => {});
    return p;
  }

  async uploadNow(file, onProgress, opts = {}) {
    const conn = this.conn;
    const ref = randomId('mu_');
    const mime = file.type || 'application/octet-stream';
    let failure = null;
    let ackResolve;
    let ackReject;
    const acked = new Promise((res, rej) => {
      ackResolve = res;
      ackReject = rej;
    });
    acked.catch(() => {});
    // The start, its binary chunks and the end form one request: one id, one answer.
    const id = conn.stream(
      'media.upload.start',
      { media_ref: ref, kind: mediaKind(mime), mime, size: file.size, filename: file.name || 'file', ...(opts.voice ? { voice: true } : {}) },
      (f) => {
        if (f.type === 'media.upload.ack') {
          ackResolve(f.payload);
          return true;
        }
        if (f.type === 'error') {
          failure = new RequestError(f.payload.code, f.payload.message);
          ackReject(failure);
          return true;
        }
        return false;
      },
    );
    const hash = sha256.create();
    let sent = 0;
    onProgress(0);
    while (sent < file.size && !failure) {
      const chunk = new Uint8Array(await file.slice(sent, sent + CHUNK).arrayBuffer());
      hash.update(chunk);
      while (conn.buffered > HIGH_WATER && !failure) {
        onProgress(Math.max(0, sent - conn.buffered) / file.size);
        await nextTick();
      }
      if (failure) break;
      conn.sendBinary(chunk);
      sent += chunk.length;
      onProgress(Math.max(0, sent - conn.buffered) / file.size);
    }
    while (conn.buffered > 0 && !failure && conn.online) {
      onProgress(Math.max(0, sent - conn.buffered) / file.size);
      await nextTick(30);
    }
    if (failure) throw failure;
    conn.sendFrame({ type: 'media.upload.end', id, payload: { media_ref: ref, sha256: bytesToHex(hash.digest()) } });
    await acked;
    onProgress(1);
    return ref;
  }

  /** Remembers a local object URL for a media id (a raster image this browser just sent). */
  remember(mediaId, url) {
    this.urls.set(mediaId, url);
  }

  /** An object URL for the media, pulling it once; `onProgress` gets 0…1. */
  url(info, onProgress = () => {}) {
    if (this.urls.has(info.media_id)) return Promise.resolve(this.urls.get(info.media_id));
    if (this.inflight.has(info.media_id)) return this.inflight.get(info.media_id);
    const run = () => this.pullNow(info, onProgress);
    const p = this.pulls.then(run, run).then((blob) => {
      const url = URL.createObjectURL(blob);
      this.urls.set(info.media_id, url);
      this.inflight.delete(info.media_id);
      return url;
    });
    p.catch(() => this.inflight.delete(info.media_id));
    this.pulls = p.catch(() => {});
    this.inflight.set(info.media_id, p);
    return p;
  }

  pullNow(info, onProgress) {
    const conn = this.conn;
    return new Promise((resolve, reject) => {
      let header = null;
      const parts = [];
      let got = 0;
      const hash = sha256.create();
      const finish = (fn) => {
        conn.binarySink = null;
        fn();
        return true;
      };
      conn.binarySink = (buf) => {
        parts.push(buf);
        hash.update(new Uint8Array(buf));
        got += buf.byteLength;
        onProgress(header && header.size ? got / header.size : 0);
      };
      try {
        conn.stream('media.pull', { media_id: info.media_id }, (f) => {
          if (f.type === 'media.pull') {
            header = f.payload;
            onProgress(0);
            return false;
          }
          if (f.type === 'media.pull.end') {
            const digest = bytesToHex(hash.digest());
            if (!f.payload.ok) return finish(() => reject(new RequestError('internal', 'The transfer failed.')));
            if (header && header.sha256 && header.sha256 !== digest) {
              return finish(() => reject(new RequestError('internal', 'The file arrived damaged.')));
            }
            // Only a verified raster image keeps its type: a blob: URL runs in this page's
            // origin, so nothing that a browser would execute (SVG, HTML) may ever be one.
            const type = blobType(header || info);
            return finish(() => resolve(new Blob(parts, { type })));
          }
          if (f.type === 'error') return finish(() => reject(new RequestError(f.payload.code, f.payload.message)));
          return false;
        });
      } catch (e) {
        conn.binarySink = null;
        reject(e);
      }
    });
  }
}
