import torch as T,torch.nn.functional as F
d='cuda';K,N,G=512,256,128
q=T.randint(0,16,(K,N),device=d);z=T.randint(0,16,(K//G,N),device=d);s=(T.rand(K//G,N,device=d)*.01+.001).half()
W=(q-z.repeat_interleave(G,0)).float()*s.float().repeat_interleave(G,0)
t=T.stack([s.float(),(8-z).float()*s.float()],2).bfloat16()
x=T.randn(2,K,device=d).bfloat16();c=q.t().contiguous().int()
for hf in(1,0):
 a,b=c[:,0::2],c[:,1::2];hi,lo=(a,b)if hf else(b,a)
 p=T.ops.aten._convert_weight_to_int4pack(((hi<<4)|lo).to(T.uint8),8)
 y=T.ops.aten._weight_int4pack_mm(x,p,G,t);r=x.float()@W
 print('hf',hf,float((y.float()-r).norm()/r.norm()),y.dtype)
try:T.ops.aten._weight_int4pack_mm(x.half(),p,G,t.half());print('fp16 ok')
except Exception as e:print('fp16',str(e)[:150])
@T.compile(fullgraph=True,dynamic=False)
def an(r,w,e:float,*ps):
 v=r.float()
 for u in ps:v=v+u.float()
 o=v.half();f=o.float();return o,(f*T.rsqrt(f.pow(2).mean(-1,keepdim=True)+e)*w.float()).half()
B,H,S,D=2,8,16,64;kc=T.zeros(B,2,S,D,device=d).half();vc=kc.clone();pos=T.zeros((),dtype=T.long,device=d)
ar=T.arange(S,device=d);r0=T.randn(B,H*D,device=d).half();w=T.ones(H*D,device=d).half()
def step():
 qq=T.randn(B,H,1,D,device=d).half();kk=T.randn(B,2,1,D,device=d).half()
 kc.index_copy_(2,pos.view(1),kk);vc.index_copy_(2,pos.view(1),kk)
 o=F.scaled_dot_product_attention(qq,kc,vc,attn_mask=(ar<=pos).view(1,1,1,-1),enable_gqa=True)
 return an(r0,w,1e-6,o.reshape(B,-1),o.reshape(B,-1))
st=T.cuda.Stream();st.wait_stream(T.cuda.current_stream())
with T.cuda.stream(st):
 for _ in range(3):step()
T.cuda.current_stream().wait_stream(st);g=T.cuda.CUDAGraph()
with T.cuda.graph(g):out=step()
for i in range(5):pos.fill_(i);g.replay()
T.cuda.synchronize();print('graph ok',out[1].shape,float(out[1].float().abs().mean()),int((kc.abs().sum((0,1,3))>0).sum()))
