"""The web export: the browser and Node.js translator (``keras-nmt web``).

:mod:`keras_nmt.web.folder` writes a static folder from an ONNX export: the int8 model,
its metadata, the text rules as data (:mod:`keras_nmt.text.rule_data`), the JavaScript
module that runs them (``js/``), a page, a Node.js command and onnxruntime-web's files
(:mod:`keras_nmt.web.runtime`, pinned by this package's ``package-lock.json``).
"""
