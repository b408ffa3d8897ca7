/* The search page's snippets without fetching pages (book/_ext/offline_search.py).
   Sphinx's searchtools.js fetches each hit's page to cut a snippet from it; a book opened from
   disk (file://) may not fetch.  Fetches of a page of this book are answered from
   window.RCTEACH_SEARCH_TEXTS (its text, section by section), any other fetch goes through. */
(() => {
  const texts = window.RCTEACH_SEARCH_TEXTS || {};
  const fetchFromNetwork = window.fetch.bind(window);
  const root = new URL(document.documentElement.dataset.content_root || "./", document.baseURI);
  window.fetch = (resource, options) => {
    const url = new URL(typeof resource === "string" ? resource : resource.url, document.baseURI);
    const page = url.href.startsWith(root.href) && url.pathname.endsWith(".html")
      ? decodeURI(url.href.slice(root.href.length).split(/[?#]/)[0]).replace(/\.html$/, "") : null;
    if (page !== null && page in texts) {
      return Promise.resolve(new Response(texts[page], {headers: {"Content-Type": "text/html"}}));
    }
    return fetchFromNetwork(resource, options);
  };
})();
