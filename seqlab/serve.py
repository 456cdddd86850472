"""HTTP JSON API over a saved model (FastAPI).

    POST /predict  {"sentences": ["EU rejects German call ."], "nbest": null}
        -> {"predictions": [{"tokens": [...], "tags": [...], "spans": [...]}]}
    GET  /info     model description
    GET  /health   {"status": "ok"}
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from seqlab.errors import SeqlabError
from seqlab.tagger import Tagger


class PredictRequest(BaseModel):
    sentences: list[str | list[str]] = Field(..., max_length=10_000, description="raw strings or token lists")
    nbest: int | None = Field(None, ge=1, le=50)


def create_app(tagger: Tagger):
    try:
        from fastapi import FastAPI, HTTPException
    except ImportError:  # pragma: no cover - optional dependency
        raise SeqlabError("serving needs FastAPI: pip install 'seqlab[serve]'") from None
    app = FastAPI(title="seqlab", version=tagger.info()["seqlab_version"])

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok"}

    @app.get("/info")
    def info() -> dict:
        return tagger.info()

    @app.post("/predict")
    def predict(req: PredictRequest) -> dict:
        try:
            preds = tagger.predict(req.sentences, nbest=req.nbest)
        except SeqlabError as err:
            raise HTTPException(status_code=422, detail=str(err)) from None
        return {"predictions": [p.to_dict() for p in preds]}

    return app


def run_server(model: str, host: str, port: int) -> None:
    try:
        import uvicorn
    except ImportError:  # pragma: no cover - optional dependency
        raise SeqlabError("serving needs uvicorn: pip install 'seqlab[serve]'") from None
    uvicorn.run(create_app(Tagger.load(model)), host=host, port=port, log_level="info")
