"""A screenshot of the page of ``keras-nmt serve``, or with ``--site`` of a web export's
page (``keras-nmt web``), with its alignment heat map.

Starts ``keras-nmt serve EXPORT_DIR`` in a child process on a free loopback port (or serves
the ``--site`` folder statically, and EXPORT_DIR is not read), opens the page in Debian's
headless Chromium (selenium through Debian's chromedriver: ``apt-get
install chromium chromium-driver``, nothing downloaded), types the sentences, waits for
each translation's heat map, and saves a PNG of the whole page (it measures nothing: no report).

Usage::

    python -m bench.page_screenshot EXPORT_DIR --nbest 3 \\
        --sentence "the cat sleeps near the big house ." --out docs/figures/serve/page.png
    python -m bench.page_screenshot - --site site --sentence "..." --out docs/figures/web/page.png
"""

from __future__ import annotations

import sys

from bench import _common
from bench.serving_load import Server
from bench.web_speed import StaticServer

PROG = "page_screenshot"

WIDTH = 900


def main(argv=None) -> int:
    parser = _common.parser(PROG, __doc__, report=False)
    parser.add_argument("export_dir")
    _common.add(parser, "name")
    parser.add_argument("--sentence", action="append", required=True,
                        help="a sentence to type (repeatable: one line each)")
    parser.add_argument("--nbest", type=int, default=1)
    parser.add_argument("--out", required=True, help="the PNG to write")
    parser.add_argument("--site", help="a web export's folder: its page instead of the server's")
    args = parser.parse_args(argv)
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver = _common.headless_chromium(WIDTH)
    server = (StaticServer(args.site, isolate=False) if args.site
              else Server(args.export_dir, args.name, []))
    try:
        driver.get(server.url + ("/index.html" if args.site else "/"))
        wait = WebDriverWait(driver, 120)
        if args.site:
            wait.until(lambda d: d.find_element(By.ID, "translate").is_enabled())
        else:
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#model option"))
            nbest = driver.find_element(By.ID, "nbest")
            nbest.clear()
            nbest.send_keys(str(args.nbest))
        driver.find_element(By.ID, "text").send_keys("\n".join(args.sentence))
        driver.find_element(By.ID, "translate").click()
        # A line of several sentences draws a heat map per sentence: at least one a line.
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "table.heatmap"))
                   >= len(args.sentence))
        for _ in range(2):  # the window's frame takes some of its height: measure again
            missing = driver.execute_script(
                "return document.documentElement.scrollHeight - window.innerHeight")
            driver.set_window_size(WIDTH, driver.get_window_size()["height"] + missing + 16)
        if not driver.save_screenshot(args.out):
            raise SystemExit(f"could not write {args.out}")
    finally:
        driver.quit()
        server.stop()
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
