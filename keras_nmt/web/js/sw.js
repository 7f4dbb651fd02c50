// The service worker of a web export: it keeps the folder's files in the browser's cache,
// so the page loads and translates with its server gone, and it marks the page
// cross-origin isolated (COOP and COEP headers), which onnxruntime-web's threads need.
// The files are those model/web.json lists under "assets"; the cache is named by the
// export's id, so a new export replaces it.

const ISOLATION = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
};

async function manifest() {
  const response = await fetch(new URL('model/web.json', self.registration.scope), { cache: 'no-store' });
  return response.json();
}

self.addEventListener('install', (event) => {
  event.waitUntil((async () => {
    const web = await manifest();
    const cache = await caches.open(`keras-nmt-${web.id}`);
    await cache.addAll(['./', ...web.assets].map((path) => new URL(path, self.registration.scope)));
    await self.skipWaiting();
  })());
});

self.addEventListener('activate', (event) => {
  event.waitUntil((async () => {
    const web = await manifest().catch(() => null);
    if (web) {
      for (const name of await caches.keys()) {
        if (name.startsWith('keras-nmt-') && name !== `keras-nmt-${web.id}`) await caches.delete(name);
      }
    }
    await self.clients.claim();
  })());
});

function isolated(response) {
  if (!response || response.type === 'opaque') return response;
  const headers = new Headers(response.headers);
  for (const [name, value] of Object.entries(ISOLATION)) headers.set(name, value);
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
}

self.addEventListener('fetch', (event) => {
  const url = new URL(event.request.url);
  if (event.request.method !== 'GET' || url.origin !== self.location.origin) return;
  event.respondWith((async () => {
    const cached = await caches.match(event.request, { ignoreSearch: true });
    return isolated(cached || await fetch(event.request));
  })());
});
