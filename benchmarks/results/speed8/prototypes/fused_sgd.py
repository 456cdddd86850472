import torch, time
torch.set_num_threads(2)
shapes=[(18950, 50), (82, 30), (50, 90), (50,), (9, 8), (400, 108), (400, 100), (400,), (400,), (400, 108), (400, 100), (400,), (400,), (40, 200), (40,), (40, 40), (40,), (40,)]
def make(kind):
    torch.manual_seed(0)
    ps=[torch.nn.Parameter(torch.randn(s)) for s in shapes]
    kw = {"foreach": True} if kind == "foreach" else {"fused": True}
    opt=torch.optim.SGD(ps, lr=0.015, momentum=0.9, **kw)
    return ps, opt
res={}
for kind in ["foreach","fused"]*2:
    ps,opt=make(kind)
    torch.manual_seed(1)
    grads=[[torch.randn(s) for s in shapes] for _ in range(3)]
    for i in range(20):
        for p,g in zip(ps,grads[i%3]): p.grad=g.clone()
        opt.step()
    t=time.perf_counter()
    for i in range(200):
        for p,g in zip(ps,grads[i%3]): p.grad=g
        opt.step()
    res.setdefault(kind,[]).append(round((time.perf_counter()-t)/200*1e6))
    if kind=="foreach": wf=[p.detach().clone() for p in ps]
    else: wz=[p.detach().clone() for p in ps]
print(res, "max diff", max((a-b).abs().max().item() for a,b in zip(wf,wz)))
